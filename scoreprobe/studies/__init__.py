"""Many training runs: the recipes the studies share (`recipes`), one run start to end (`runner`), the queue
that runs them (`queue`), their compact exports (`export`), reading the exports back and writing a study's
report (`presets`, `format`).

A user's own grid (docs/studies.md), re-exported here lazily (nothing heavy is imported with the package):
`Grid`, `views` (`grid`); `run`, `Summary` (`execute`; on dask: `distributed`); `collect`, `pool`,
`fit_exponent`, `cells`, `exponent_text` (`tidy`)."""

_WHERE = {"Grid": "grid", "views": "grid", "run": "execute", "Summary": "execute", "collect": "tidy",
          "pool": "tidy", "fit_exponent": "tidy", "cells": "tidy",
          "exponent_text": "tidy"}


def __getattr__(name):
    import importlib
    if name in _WHERE:
        value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
