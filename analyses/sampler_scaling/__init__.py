"""Does τ_mem's exponent in N depend on the sampler? The G = 2 N-axis runs re-measured with EDM's stochastic sampler."""
