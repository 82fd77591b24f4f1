"""A fair GPT–DiT match: learning rates tuned on their own split, seeds at the best, per step and per FLOP (issue 36 item 7)."""
