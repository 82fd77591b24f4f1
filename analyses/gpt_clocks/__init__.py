"""The two clocks of an autoregressive GPT next to the shipped DiT, on the same data."""
