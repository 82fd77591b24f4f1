"""Which stored results mean the same under this scoreprobe's definitions (docs/definitions.md).

Stores of clocks, basins and retention record `DEFINITIONS_VERSION`. A store written under
another version is refused, except where every change between the two versions concerns only
the adaptive PF-ODE engine (`ENGINE_ONLY`) and the store used no engine, or only how τ is read off
the stored per-step curves (`READING_ONLY`): a store sampled on the fixed Heun grid holds the same
numbers under both, so resuming or reporting it is sound, and a user's clocks are not recomputed
because the basin engine was retuned. τ stored in a store's attrs under an earlier reading carry no
`tau_definition` (or another one): readers re-read them (`tau_attrs_current`), never mix them.
"""
from scoreprobe.defaults import DEFINITIONS_VERSION

# version: what it changed. Versions in ENGINE_ONLY changed the engine's algorithm or defaults only.
HISTORY = {2: "validity by thresholded bits, novel_valid, τ on logit-in-log-step curves",
           3: "the adaptive engine is the default solver of basins and retention",
           4: "the engine at rtol = atol = 5e-3, h0 0.7, decided over the stages of its last step",
           5: "the engine decides a row at decide_tol 0.2 instead of 0.05",
           6: "τ = the crossing into the first stretch of 2 consecutive checkpoints whose 95% Wilson lower bound "
              "is at or above the threshold ('reliably exceeds'); bootstrap resamples sample indices jointly "
              "across checkpoints"}
ENGINE_ONLY = frozenset({3, 4, 5})
READING_ONLY = frozenset({6})   # per-step results unchanged; only τ (in attrs) is read differently


def uses_engine(config):
    """True when a store config names the adaptive engine anywhere (solver, sampler or settings)."""
    if isinstance(config, dict):
        if "engine" in config or config.get("solver") == "adaptive":
            return True
        return config.get("name") == "adaptive" or any(uses_engine(v) for v in config.values())
    if isinstance(config, (list, tuple)):
        return any(uses_engine(v) for v in config)
    return False


def equivalent(version, config, current=DEFINITIONS_VERSION):
    """True when results written under definitions `version` with `config` mean the same under `current`."""
    if version == current:
        return True
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (version, current)):
        return False
    if version < 2 or version > current:
        return False
    changes = [v for v in range(version + 1, current + 1) if v not in READING_ONLY]
    return all(v in ENGINE_ONLY for v in changes) and (not changes or not uses_engine(config))


def tau_attrs_current(attrs):
    """True when the τ in a clocks store's attrs were read under this version's τ definition."""
    from scoreprobe.defaults import DEFAULT_DEFINITION
    return "tau_rule" in attrs and str(attrs.get("tau_definition", "")).startswith(DEFAULT_DEFINITION)
