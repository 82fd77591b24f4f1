"""The scaling claims as evidence: seeds everywhere; the G, N and capacity axes, other rules, a matched GPT."""
