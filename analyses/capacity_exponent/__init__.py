"""Data draws × training seeds: how much of τ_rule and τ_mem the training set decides (issue 36 items 1, 5)."""
