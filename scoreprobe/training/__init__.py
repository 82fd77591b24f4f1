"""Training: the run configuration (`config.py`), the resumable training loop with log-spaced
checkpoints (`train.py`) and ensembles of runs trained as one stacked model (`ensemble.py`)."""
