"""The two clocks: τ_rule and τ_mem over the rule's group size G and the training-set size N."""
