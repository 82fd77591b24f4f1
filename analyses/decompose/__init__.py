"""What kind of denoiser is it? The network against the exact oracles, the loss crossover, disjoint pairs."""
