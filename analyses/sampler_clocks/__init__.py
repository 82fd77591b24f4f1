"""Does memorization depend on the sampler? The clocks of the shipped series under each sampler."""
