"""Features in the activations: SAEs on the shipped DiT scored against the rule's parity groups."""
