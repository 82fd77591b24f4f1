"""A kill in the middle of training, for the resume tests: the trainer's step function raises KeyboardInterrupt on its
`at`-th call, as a SIGINT between two steps would, and the run directory is left as that kill leaves it."""
import pytest


def killed_at(monkeypatch, module, name, at, call):
    """call() with module.<name> (a step function) raising KeyboardInterrupt on its `at`-th call (1-based); the kill
    must happen (pytest.raises), and module.<name> is the real function again afterwards."""
    real, calls = getattr(module, name), {"n": 0}

    def dying(*a, **k):
        calls["n"] += 1
        if calls["n"] == at:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(module, name, dying)
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        monkeypatch.setattr(module, name, real)
