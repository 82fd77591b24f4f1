"""Networks and denoiser wrappers: DiT and GPT (and the GPT's token orders, `order.py`), EDM
preconditioning, parameterizations and their VP schedules, stacks of checkpoints evaluated in one
pass, and building a network from its architecture (`build.py`). Reading other people's files lives
in `scoreprobe.loading`."""
