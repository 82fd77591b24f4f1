"""τ_rule, τ_mem, τ_novel and the innovation window, read off the clock curves, with bootstrap CIs.

The definitions (docs/definitions.md, "Clocks"): each curve y(step) — a fraction of samples — is
interpolated between checkpoints linearly in (log(step + 1), logit y), fractions clipped to
[1/(2n), 1 − 1/(2n)] for n samples. logit-in-log-step follows the sigmoidal rise of these curves,
so a crossing moves little when checkpoints are dropped (linear interpolation of y itself moves
τ_mem of the shipped series by 8%, outside its CI, when only every third checkpoint is kept;
the logit, by 3.5%). Then, under `definition`:

- "reliable" (the default from definitions version 6; the paper's "reliably exceeds"): a checkpoint
  exceeds the threshold *with confidence* when the lower end of its 95% Wilson interval (n samples) is
  at or above it; τ = the interpolated crossing into the stretch of checkpoints at or above the
  threshold that holds the first RELIABLE_K (2) consecutive confident checkpoints (a stretch may end at
  the last checkpoint: the last one alone suffices there). One lucky checkpoint does not count;
- "first_crossing" (versions ≤ 5): the first step where the interpolated curve reaches its threshold;

NaN: never reached. The window = the set of steps from τ_rule on where the interpolated rule_acc ≥
rule_threshold and mem_ratio < mem_threshold; it may be several intervals (a dip of rule accuracy
shows as a gap). It is open iff non-empty; reported as its bounds and its log10 width (sum over
intervals).

Confidence intervals: the sample indices are resampled with replacement, jointly across checkpoints
(sample i starts from the same noise at every checkpoint, so its states are paired), `n_boot` times;
a τ not reached in a resample counts as +∞ (so an upper bound can be "not reached"). A crossing with
no checkpoint within a factor 1.5 of it (in step + 1) is flagged under-resolved and warned about
(`ResolutionWarning`).

`tau_summary` returns these at one pair of thresholds (a dict, what `clocks` stores in its attrs);
`scoreprobe.stats.thresholds.taus` (sp.taus) gives them as curves over thresholds (a Dataset).
"""
import functools
import math
import warnings

import numpy as np
import scipy.stats

from scoreprobe.defaults import MEM_THRESHOLD, RULE_THRESHOLD
from scoreprobe.errors import ConfigError, DataError, ResolutionWarning
from scoreprobe.limits import MAX_BOOT, MAX_SAMPLES, check_int, check_real, check_seed
from scoreprobe.stats.crossings import DEFAULT_DEFINITION, DEFINITIONS, RELIABLE_K, crossing_of, logit_fraction
from scoreprobe.stats.crossings import crossing, window_intervals, window_segments, window_summary  # noqa: F401

RESOLUTION_FACTOR = 1.5   # a crossing needs a checkpoint within this factor of it (in step + 1)
INTERPOLATION = "linear in (log(step + 1), logit(fraction)), fractions clipped to [1/(2n), 1 - 1/(2n)]"

# ---------------------------------------------------------------------------------------------
# τ and the window of a clocks Dataset
# ---------------------------------------------------------------------------------------------

TAUS = ("tau_rule", "tau_mem", "tau_novel")


def _evaluate(u, rule, mem, n, th, definition=DEFAULT_DEFINITION):
    """Statistics of (B, S) curves rule_acc, mem_ratio (novel_valid = rule − mem) -> dict of (B,)."""
    check_definition(definition)
    out = {"tau_rule": crossing_of(u, rule, n, th["rule"], definition),
           "tau_mem": crossing_of(u, mem, n, th["mem"], definition),
           "tau_novel": crossing_of(u, rule - mem, n, th["novel"], definition)}
    R, M = logit_fraction(rule, n), logit_fraction(mem, n)                  # (B, S)
    lo, hi = window_segments(u, R, M, logit_fraction(th["rule"], n), logit_fraction(th["mem"], n))
    start = np.where(np.isnan(out["tau_rule"]), np.inf, out["tau_rule"])[:, None]   # the window starts at τ_rule
    lo = np.where(hi >= start, np.maximum(lo, start), np.inf)
    hi = np.where(np.isfinite(lo), hi, -np.inf)
    out["window_open"], out["window_lo"], out["window_hi"], out["window_log10_width"] = window_summary(lo, hi)
    out["_segments"] = (lo, hi)
    return out


def check_definition(definition):
    if definition not in DEFINITIONS:
        raise ConfigError(f"unknown τ definition {definition!r}; use one of {', '.join(DEFINITIONS)}")


def _codes(ds):
    """(S, n) per-sample category: 0 memorized, 1 valid and not memorized, 2 the rest; and n."""
    from scoreprobe.data.datasets import STATE_CODES
    state = np.asarray(ds["state"].values)                                # (S, n)
    new = np.isin(state, [STATE_CODES["valid_novel"], STATE_CODES["valid_heldout"]])
    return np.where(state == STATE_CODES["valid_memorized"], 0, np.where(new, 1, 2)), state.shape[1]


def sample_weights(n, n_boot, seed):
    """(n_boot, n) multiplicities of the n sample indices in each resample (drawn with replacement): the
    same weights apply at every checkpoint, so a sample's states stay paired across checkpoints. Read-only
    (cached: every statistic of a run with the same seed reads the same resamples)."""
    return _weights(int(n), int(n_boot), int(seed))


@functools.lru_cache(maxsize=8)
def _weights(n, n_boot, seed):
    rng = np.random.default_rng(seed)
    w = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(np.float64)
    w.flags.writeable = False
    return w


def _bootstrap(ds, u, th, n_boot, seed, definition=DEFAULT_DEFINITION):
    """_evaluate on n_boot joint resamples of the sample indices."""
    rule, mem, n = resampled_curves(ds, n_boot, seed)
    return _evaluate(u, rule, mem, n, th, definition)


def resampled_curves(ds, n_boot, seed):
    """rule_acc and mem_ratio (n_boot, S) of joint resamples of the sample indices of ds's `state`, and n."""
    codes, n = _codes(ds)
    W = sample_weights(n, n_boot, seed)                                   # (B, n)
    mem = W @ (codes == 0).T.astype(np.float64) / n                       # (B, S)
    return mem + W @ (codes == 1).T.astype(np.float64) / n, mem, n


def _ci(values, ci, infinite_nan=True):
    """Equal-tailed percentile interval of (B,) values; NaN counts as +inf when infinite_nan."""
    v = np.where(np.isnan(values), np.inf, values) if infinite_nan else values[np.isfinite(values)]
    if v.size == 0:
        return [math.nan, math.nan]
    q = [(1 - ci) / 2 * 100, (1 + ci) / 2 * 100]
    return [float(np.percentile(v, q[0], method="lower")), float(np.percentile(v, q[1], method="higher"))]


def _to_step(u):
    return float(np.expm1(u)) if np.isfinite(u) else (math.nan if np.isnan(u) else float(u))


def _resolution(u, value):
    """Factor (in step + 1) from the crossing at u-value `value` to its nearest checkpoint."""
    return float(np.exp(np.min(np.abs(u - value))))


def tau_summary(ds, rule_threshold=RULE_THRESHOLD, mem_threshold=MEM_THRESHOLD, novel_threshold=None, n_boot=1000,
                ci=0.95, seed=0, warn=True, definition=DEFAULT_DEFINITION):
    """Read τ_rule, τ_mem, τ_novel and the innovation window off a clocks Dataset, with bootstrap CIs,
    at one pair of thresholds (sp.taus gives them over a range of thresholds).

    Parameters
    ----------
    ds : Dataset with `rule_acc`, `mem_ratio` (step,); `state` (step, sample) for the CIs (without
        it the CIs are NaN); attrs `novel_oracle` (the perfect generalizer's novel_valid) if known.
    rule_threshold, mem_threshold : thresholds of rule_acc and mem_ratio.
    novel_threshold : threshold of novel_valid (default rule_threshold × attrs["novel_oracle"], or
        rule_threshold when unknown).
    n_boot, ci, seed : bootstrap resamples (0: no CIs), interval level, seed of the resampling.
    warn : issue a ResolutionWarning for crossings with no checkpoint within a factor 1.5.
    definition : "reliable" (default) or "first_crossing" (module docstring).

    Returns
    -------
    dict (JSON-able): tau_rule, tau_mem, tau_novel (steps; NaN never reached) with `<name>_ci`
    [lo, hi] (hi +inf/None: not reached in > (1 − ci)/2 of the resamples), `<name>_reached` (share
    of resamples that reach it); window_open, window_open_share, window_lo, window_hi,
    window_log10_width (+ `_ci`), window_intervals [[lo, hi], ...] in steps, window_hi_censored
    (the window still holds at the last checkpoint), log10_ratio = log10(τ_mem/τ_rule),
    under_resolved (names), thresholds, n_boot, ci, tau_interpolation, tau_definition, window_status.
    """
    check_definition(definition)
    n_boot, ci, seed = check_boot(n_boot, ci, seed)
    for name, t in (("rule_threshold", rule_threshold), ("mem_threshold", mem_threshold),
                    ("novel_threshold", novel_threshold)):
        if t is not None:
            check_real(t, name, 0.0, 1.0)
    ds, steps, u, n, th = setup(ds, rule_threshold, mem_threshold, novel_threshold)
    point = point_values(ds, u, n, th, definition)
    boot = _bootstrap(ds, u, th, int(n_boot), seed, definition) if n_boot and "state" in ds else None
    out = _report(point, boot, u, ci)
    out.update(rule_threshold=rule_threshold, mem_threshold=mem_threshold, novel_threshold=th["novel"],
               n_boot=int(n_boot) if boot is not None else 0, ci=ci, tau_interpolation=INTERPOLATION,
               tau_definition=definition_text(definition))
    out["window_status"] = status_text(out["window_open"], out["tau_rule"], out["tau_mem"],
                                       float(np.nanmax(ds["rule_acc"].values)), rule_threshold, definition)
    # the peak is "the largest measured rule_acc": a fraction over all samples (non-finite ones count as
    # invalid), NaN only at a checkpoint not measured, which has no value to be the peak
    if warn and out["under_resolved"]:
        warnings.warn(_resolution_message(out, steps), ResolutionWarning, stacklevel=2)
    return out




def definition_text(definition):
    """How τ was read, for attrs and tables."""
    if definition == "first_crossing":
        return "first_crossing: the first step where the interpolated curve reaches the threshold"
    return (f"reliable: the crossing into the first stretch with {RELIABLE_K} consecutive checkpoints whose "
            "95% Wilson lower bound is at or above the threshold")


def attr_number(attrs, name, default, integer=False):
    """attrs[name] (a store's attribute, maybe edited by hand) as a finite float (or, `integer`, a positive int
    up to MAX_SAMPLES), `default` when absent: limits.check_real / check_int, DataError naming the attribute."""
    value = attrs.get(name, default)
    if value is None:
        return value
    what = f"attribute {name!r}"
    return check_int(value, what, 1, MAX_SAMPLES, DataError) if integer else check_real(value, what, error=DataError)


def novel_oracle_of(ds):
    """ds.attrs["novel_oracle"] (the perfect generalizer's novel_valid, 1 when absent): a number in [0, 1]."""
    return check_real(ds.attrs.get("novel_oracle", 1.0), "attribute 'novel_oracle'", 0.0, 1.0, DataError)


def check_boot(n_boot, ci, seed):
    """(n_boot, ci, seed) checked before any work: n_boot an integer in [0, MAX_BOOT] (0: no intervals), ci a level
    in (0, 1), seed a seed; ConfigError otherwise (a NaN level, a negative or huge n_boot were numpy tracebacks)."""
    n_boot = check_int(n_boot, "n_boot", 0, MAX_BOOT)
    if not 0 < check_real(ci, "ci", 0.0, 1.0) < 1:
        raise ConfigError(f"ci must be an interval level in (0, 1), got {ci!r}")
    return n_boot, float(ci), check_seed(seed)


def setup(ds, rule_threshold=RULE_THRESHOLD, mem_threshold=MEM_THRESHOLD, novel_threshold=None):
    """Sorted ds, steps (S,), u = log(step + 1) (S,), n samples, thresholds {"rule", "mem", "novel"}."""
    ds = ds.sortby("step")
    steps = ds["step"].values.astype(np.float64)
    if steps.size == 0 or np.any(steps < 0):
        raise ConfigError("taus needs at least one checkpoint and training steps >= 0")
    n = ds.sizes.get("sample") or attr_number(ds.attrs, "n_samples", None, integer=True) or 10 ** 6
    novel_threshold = rule_threshold * novel_oracle_of(ds) if novel_threshold is None else novel_threshold
    return ds, steps, np.log1p(steps), n, {"rule": rule_threshold, "mem": mem_threshold, "novel": novel_threshold}


def point_values(ds, u, n, th, definition=DEFAULT_DEFINITION):
    """_evaluate on the measured curves of ds: dict of (1,) arrays."""
    rule, mem = (ds[k].values.astype(np.float64)[None] for k in ("rule_acc", "mem_ratio"))
    return _evaluate(u, rule, mem, n, th, definition)


def bootstrap(ds, u, th, n_boot, seed, definition=DEFAULT_DEFINITION):
    """The sample-level bootstrap of tau_summary(): dict of (n_boot,) arrays in u units (NaN: not reached)."""
    return _bootstrap(ds, u, th, n_boot, seed, definition)


def _report(point, boot, u, ci):
    out, under = {}, []
    for key in TAUS + ("window_lo", "window_hi"):
        value = float(point[key][0])
        out[key] = _to_step(value)
        if boot is not None and key in TAUS:
            out[key + "_ci"] = [_to_step(v) for v in _ci(boot[key], ci)]
            out[key + "_reached"] = float(np.mean(np.isfinite(boot[key])))
        elif boot is not None:
            out[key + "_ci"] = [_to_step(v) for v in _ci(boot[key], ci, infinite_nan=False)]
        same_as_tau = key.startswith("window") and value in (point["tau_rule"][0], point["tau_mem"][0])
        if np.isfinite(value) and not same_as_tau and _resolution(u, value) > RESOLUTION_FACTOR:
            under.append(key)
    out["window_open"] = bool(point["window_open"][0])
    out["window_log10_width"] = float(point["window_log10_width"][0])
    lo, hi = point["_segments"]
    out["window_intervals"] = [[_to_step(a), _to_step(b)] for a, b in window_intervals(lo[0], hi[0])]
    out["window_hi_censored"] = bool(out["window_open"] and point["window_hi"][0] >= u[-1])
    if boot is not None:
        out["window_open_share"] = float(np.mean(boot["window_open"]))
        out["window_log10_width_ci"] = _ci(boot["window_log10_width"], ci, infinite_nan=False)
    t_rule, t_mem = out["tau_rule"], out["tau_mem"]
    out["log10_ratio"] = float(np.log10(t_mem / t_rule)) if np.isfinite(t_rule) and np.isfinite(t_mem) \
        and t_rule > 0 else math.nan
    out["under_resolved"] = under
    return out


def _resolution_message(out, steps):
    parts = []
    for key in out["under_resolved"]:
        v = out[key]
        below, above = steps[steps <= v], steps[steps >= v]
        around = f"between checkpoints {below.max():.0f} and {above.min():.0f}" if below.size and above.size \
            else "outside the measured steps"
        parts.append(f"{key} = {v:.0f} ({around})")
    return (f"under-resolved crossing: {'; '.join(parts)}: no checkpoint within a factor {RESOLUTION_FACTOR} "
            f"of it; measure more checkpoints there for a trustworthy value")


# ---------------------------------------------------------------------------------------------
# Why a window is closed
# ---------------------------------------------------------------------------------------------

WINDOW_STATUSES = ("open", "closed: tau_rule >= tau_mem", "closed: rule accuracy never reaches {threshold} (peak {peak})",
                   "closed: rule accuracy reaches {threshold} only where memorization is at or above its threshold",
                   "closed: rule accuracy never reliably exceeds {threshold} (peak {peak})")


def _peak_text(x, threshold):
    """x to 3 decimals, trailing zeros dropped; floored when rounding would reach the threshold."""
    if not math.isfinite(x):
        return "nan"
    r = round(x, 3)
    r = math.floor(x * 1000) / 1000 if r >= threshold > x else r
    return f"{r:.3f}".rstrip("0").rstrip(".")


def status_text(window_open, tau_rule, tau_mem, peak, rule_threshold=RULE_THRESHOLD, definition=DEFAULT_DEFINITION):
    """The window status string from the point values (see window_status)."""
    if window_open:
        return WINDOW_STATUSES[0]
    if not math.isfinite(tau_rule):
        text = WINDOW_STATUSES[4 if definition == "reliable" and peak >= rule_threshold else 2]
        return text.format(threshold=f"{rule_threshold:g}", peak=_peak_text(peak, rule_threshold))
    if math.isfinite(tau_mem) and tau_mem <= tau_rule:
        return WINDOW_STATUSES[1]
    return WINDOW_STATUSES[3].format(threshold=f"{rule_threshold:g}")


def window_status(ds, tau=None, rule_threshold=RULE_THRESHOLD, mem_threshold=MEM_THRESHOLD,
                  definition=DEFAULT_DEFINITION):
    """Why the innovation window of a clocks Dataset is closed, or "open". Returns one of:

    - "open": the window is non-empty (also when memorization is never reached: then the window
      runs to the last checkpoint and taus() flags window_hi_censored);
    - "closed: tau_rule >= tau_mem": both clocks reached, memorization no later than rule accuracy;
    - "closed: rule accuracy never reaches 0.9 (peak 0.44)": τ_rule not reached; the peak is the
      largest measured rule_acc to 3 decimals (floored if rounding would reach the threshold) (whether or not memorization is reached);
    - "closed: rule accuracy never reliably exceeds 0.9 (peak 0.918)": τ_rule ("reliable") not reached
      although the curve touches the threshold (no two consecutive confident checkpoints);
    - "closed: rule accuracy reaches 0.9 only where memorization is at or above its threshold":
      any other empty window (with interpolated curves it cannot happen when τ_rule < τ_mem: at
      τ_rule, mem_ratio is still below its threshold; kept so that every case has a name).

    tau : a tau_summary() result for ds (its window_open, tau_rule, tau_mem, thresholds and definition
        are used); None: computed here without CIs.
    """
    if tau is None:
        tau = tau_summary(ds, rule_threshold=rule_threshold, mem_threshold=mem_threshold, n_boot=0, warn=False,
                          definition=definition)
    peak = float(np.nanmax(ds["rule_acc"].values)) if ds["rule_acc"].size else math.nan   # measured ones (above)
    nan = math.nan
    return status_text(bool(tau["window_open"]), float(nan if tau["tau_rule"] is None else tau["tau_rule"]),
                       float(nan if tau["tau_mem"] is None else tau["tau_mem"]), peak,
                       tau.get("rule_threshold", rule_threshold), _definition_of(tau, definition))


def _definition_of(tau, default):
    """The definition named by a tau_summary result (its tau_definition text), else `default`."""
    text = str(tau.get("tau_definition") or "")
    return next((d for d in DEFINITIONS if text.startswith(d)), default if text == "" else "first_crossing")


# ---------------------------------------------------------------------------------------------
# Scaling laws
# ---------------------------------------------------------------------------------------------


def fit_power_law(N, tau, confidence=0.95):
    """Fit tau = a · N^b by least squares on (log N, log tau), with t-distribution intervals.

    Parameters
    ----------
    N, tau : (K,) positive numbers; pairs with a non-finite or non-positive value are dropped.

    Returns
    -------
    dict: a, b, a_ci, b_ci ((lo, hi) at `confidence`; NaN with only two points: every pair a unit), n (pairs
    used), r2 (coefficient of determination in log-log); with replicate runs at some N: lack_of_fit (the
    pure-error F test, `stats.misfit.lack_of_fit`) and b_ci_means (the slope's interval with the per-N means as
    units, K − 2 df, which keeps its coverage where each N deviates from the line; NaN ends below 3 distinct N).
    """
    N, tau = np.asarray(N, dtype=np.float64).ravel(), np.asarray(tau, dtype=np.float64).ravel()
    if N.shape != tau.shape:
        raise ConfigError(f"N and tau must have the same length, got {N.size} and {tau.size}")
    keep = np.isfinite(N) & np.isfinite(tau) & (N > 0) & (tau > 0)
    n = int(keep.sum())
    if n < 2 or np.unique(N[keep]).size < 2:
        raise ConfigError(f"a power-law fit needs at least two distinct N with finite τ, got {n} usable pairs")
    fit = scipy.stats.linregress(np.log(N[keep]), np.log(tau[keep]))
    t = scipy.stats.t.ppf(0.5 + confidence / 2, n - 2) if n > 2 else float("nan")
    b_ci = (fit.slope - t * fit.stderr, fit.slope + t * fit.stderr)
    ln_a_ci = (fit.intercept - t * fit.intercept_stderr, fit.intercept + t * fit.intercept_stderr)
    from scoreprobe.stats.misfit import lack_of_fit, means_slope
    x, y = np.log(N[keep]), np.log(tau[keep])
    m = means_slope(x, y, level=confidence)
    return {"a": float(np.exp(fit.intercept)), "b": float(fit.slope),
            "a_ci": tuple(float(np.exp(v)) for v in ln_a_ci), "b_ci": tuple(float(v) for v in b_ci),
            "n": n, "r2": float(fit.rvalue ** 2), "lack_of_fit": lack_of_fit(x, y),
            "b_ci_means": (m["lower"], m["upper"])}
