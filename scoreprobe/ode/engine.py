"""The adaptive PF-ODE engine: per-row steps, per-row early decision, batch compaction.

Every row of a batch integrates dx/dσ = (x − D(x, σ))/σ from σ_start down to σ_min on its own:

* **its own step size**, in t = ln σ, from the embedded error estimate of a Runge–Kutta pair
  (`scoreprobe.ode.tableaux`, Bogacki–Shampine 3(2) by default), accepted when the max-norm of the
  local error is within atol + rtol·|x| in every coordinate;
* **its own end**: a row is *decided* once the denoiser points at the vertex it already sits on,
  |D(x, σ) − sign(x)|_∞ <= decide_tol, at `patience` consecutive evaluations along its accepted
  path (a step's stages after its start, then its new point; 3 = the whole last step of bs3). Its endpoint is
  that vertex and `decided_sigma` records σ there. The criterion and why the label can no longer
  change are in docs/definitions.md ("The adaptive engine"). A row that reaches σ_min undecided
  ends with D(x, σ_min) (the Euler step to σ = 0, as on the fixed grid), `decided_sigma` = 0;
* **compaction**: each iteration evaluates the denoiser only on the rows still running, so
  evaluations and time go to the undecided rows;
* **non-finite values**: a row for which the denoiser returns NaN or inf at *any* evaluation (a
  stage of a step the controller would reject included) ends there with status non_finite and a
  NaN endpoint, which the endpoint classification labels `invalid` (as the fixed grid's NaN rows);
  it is never retried with smaller steps until max_steps.

A row's arithmetic depends only on its own state, so its endpoint does not depend on the batch
size, the chunk size or which other rows it was batched with (up to the denoiser's own
floating-point differences between batch sizes, which move a step size, and so a decided σ, by an
ulp or so; the labels and evaluation counts of the oracles are the same, tests/test_engine.py). A `models.stack.StackedDenoiser` of K
checkpoints keeps its layout (row r to model r % K): each evaluation pads the running rows of
every model to the same count with throw-away copies.
"""
import math
from dataclasses import asdict, dataclass

import numpy as np
import torch

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.ode.tableaux import PAIRS, SAFETY, error_ratio, next_step

STATUS = ("success", "max_steps", "non_finite")   # per-row status codes 0, 1, 2 (as torchode records them)
_LATER = {"sigma_knee": 0.0, "safety": SAFETY}     # settings added after stores recorded `spec()`: left out at these


@dataclass(frozen=True)
class EngineSettings:
    """Tolerances of the engine (docs/definitions.md, "The adaptive engine").

    pair : "bs3" or "heun-euler" (`scoreprobe.ode.tableaux.PAIRS`).
    rtol, atol : local error tolerance per coordinate, atol + rtol·|x|.
    decide_tol : a row is decided when |D(x, σ) − sign(x)|_∞ <= decide_tol (< 0.5) ...
    patience : ... at this many consecutive evaluations along the accepted path (each accepted
        step's stages after its start and its new point, all against the new point's vertex);
        0 turns early decision off.
    max_steps : step attempts (accepted + rejected) per row before it stops with status max_steps.
    h0, h_max : the first and the largest step, as |ln(σ_next/σ)|.
    sigma_knee : 0 (the default: off) or σ_k > 0: a step ending at σ' > σ_k is judged against
        its tolerance times σ'/σ_k (docs/definitions.md, "The adaptive engine": where D barely
        depends on x the flow shrinks an error made at σ' by σ_k/σ' on the way to σ_k), and the
        controller shortens a step that would end where the tolerance is tighter.
    safety : the controller aims the next step at safety^(q+1) times the tolerated error (0.9).
    """
    pair: str = "bs3"
    rtol: float = 0.005
    atol: float = 0.005
    decide_tol: float = 0.2
    patience: int = 3
    max_steps: int = 200
    h0: float = 0.7
    h_max: float = 3.0
    sigma_knee: float = 0.0
    safety: float = SAFETY

    def __post_init__(self):
        if self.pair not in PAIRS:
            raise ConfigError(f"unknown pair {self.pair!r}; use one of {tuple(PAIRS)}")
        for name in ("rtol", "atol", "h0", "h_max"):
            if not 0 < float(getattr(self, name)) < float("inf"):
                raise ConfigError(f"engine setting {name} must be positive and finite, got {getattr(self, name)!r}")
        if not 0 < float(self.safety) <= 1:
            raise ConfigError(f"engine setting safety must be in (0, 1], got {self.safety!r}")
        if not 0 <= float(self.sigma_knee) < float("inf"):
            raise ConfigError(f"engine setting sigma_knee must be 0 (off) or positive and finite, "
                              f"got {self.sigma_knee!r}")
        if not 0 < float(self.decide_tol) < 0.5:
            raise ConfigError(f"decide_tol must be in (0, 0.5) (a decided endpoint must be on-vertex), "
                              f"got {self.decide_tol!r}")
        for name in ("patience", "max_steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < (0 if name == "patience" else 1):
                raise ConfigError(f"engine setting {name} must be a {'non-negative' if name == 'patience' else 'positive'}"
                                  f" integer, got {v!r}")

    def spec(self):
        """The settings as a plain dict (recorded in a store's config); sigma_knee and safety only where
        they differ from their defaults, so the record of every earlier setting is unchanged."""
        return {k: (v if isinstance(v, str) else (int(v) if k in ("patience", "max_steps") else float(v)))
                for k, v in asdict(self).items() if k not in _LATER or v != _LATER[k]}

    @classmethod
    def of(cls, value=None):
        """EngineSettings from None (the defaults), a dict of overrides or an EngineSettings."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            unknown = set(value) - set(cls.__dataclass_fields__)
            if unknown:
                raise ConfigError(f"unknown engine settings {sorted(unknown)}; use {sorted(cls.__dataclass_fields__)}")
            return cls(**value)
        raise ConfigError(f"engine settings must be a dict or EngineSettings, got {type(value).__name__}")


@dataclass
class EngineResult:
    """What `solve` returns, per row b of the batch (B rows).

    x : (B, D) endpoints at σ = 0 (the vertex for decided rows; NaN rows for status non_finite: the
        denoiser returned NaN/inf for the row at some evaluation).
    decided_sigma : (B,) float64, σ at which the row was decided; 0 for rows integrated to σ_min.
    nfe : (B,) int64 denoiser evaluations; accepted, rejected : (B,) int64 steps.
    status : (B,) int8, codes of STATUS.
    """
    x: torch.Tensor
    decided_sigma: np.ndarray
    nfe: np.ndarray
    accepted: np.ndarray
    rejected: np.ndarray
    status: np.ndarray


def _check(out, x):
    if not torch.is_tensor(out) or out.shape != x.shape:
        shape = tuple(out.shape) if torch.is_tensor(out) else type(out).__name__
        raise DataError(f"the denoiser returned {shape} for input {tuple(x.shape)}; "
                        "it must return a tensor of the same shape (B, D)")
    return out.to(x.dtype)


def _call(D, x, sigma, chunk):
    """D on (n, D) rows with per-row σ (n,), `chunk` rows per forward (None: all)."""
    sigma = sigma.to(x.dtype)
    step = len(x) if chunk is None else int(chunk)
    return torch.cat([_check(D(x[i:i + step], sigma[i:i + step]), x[i:i + step]) for i in range(0, len(x), step)])


def evaluate(D, x, sigma, rows, k=1, chunk=None):
    """D(x, σ) for a subset of a batch's rows: x (n, D), sigma (n,), rows (n,) their indices in
    the batch. With a stack of K models (row r belongs to model r % K) every model's rows are
    padded to the same count m with copies of row 0 and laid out as the stack expects (m·K rows)."""
    if k == 1:
        return _call(D, x, sigma, chunk)
    model = rows % k                                                              # (n,)
    order = torch.argsort(model * len(rows) + torch.arange(len(rows), device=rows.device))
    counts = torch.bincount(model, minlength=k)                                  # (K,)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.empty_like(rows)
    rank[order] = torch.arange(len(rows), device=rows.device) - starts[model[order]]
    place = rank * k + model                                                     # (n,) in (m·K,)
    src = torch.zeros(int(counts.max()) * k, dtype=torch.long, device=rows.device)
    src[place] = torch.arange(len(rows), device=rows.device)
    chunk = None if chunk is None else max(k, int(chunk) // k * k)
    return _call(D, x[src], sigma[src], chunk)[place]                            # (n, D)


def _rhs(D, x, sigma, rows, k, chunk):
    """dx/dσ = (x − D(x, σ))/σ; x (n, D), sigma (n,) float64."""
    s = sigma.to(x.dtype)[:, None]
    return (x - evaluate(D, x, sigma, rows, k, chunk)) / s


class _State:
    """Per-row state of a batch of B rows (all on x0's device)."""

    def __init__(self, x0, sigma_start, settings):
        b, dev = x0.shape[0], x0.device
        self.x = x0.clone()                                                      # (B, D)
        self.t = torch.full((b,), math.log(sigma_start), dtype=torch.float64, device=dev)
        self.h = torch.full((b,), -float(settings.h0), dtype=torch.float64, device=dev)
        self.f = torch.zeros_like(x0)                                            # (B, D) dx/dσ at x
        self.have_f = torch.zeros(b, dtype=torch.bool, device=dev)
        self.fresh = torch.ones(b, dtype=torch.bool, device=dev)                 # point not yet judged
        self.streak = torch.zeros(b, dtype=torch.long, device=dev)
        self.nfe, self.acc, self.rej = (torch.zeros(b, dtype=torch.long, device=dev) for _ in range(3))
        self.out = torch.full_like(x0, float("nan"))
        self.decided = torch.zeros(b, dtype=torch.float64, device=dev)
        self.status = torch.zeros(b, dtype=torch.int8, device=dev)
        self.met_nan = torch.zeros(b, dtype=torch.bool, device=dev)              # a stage returned NaN/inf


def _finish(st, act, settings, t_end):
    """Ends the rows of `act` that are done (non-finite, at σ_min, decided, out of steps); returns the rest."""
    x, f, sigma = st.x[act], st.f[act], st.t[act].exp()                          # (n, D), (n, D), (n,)
    d = x - sigma.to(x.dtype)[:, None] * f                                       # (n, D) D(x, σ)
    bad = ~torch.isfinite(d).all(dim=1) | st.met_nan[act]
    at_end = ~bad & (st.t[act] <= t_end + 1e-12)
    v = torch.where(x > 0, 1.0, -1.0).to(x.dtype)                                # (n, D) vertex sign(x)
    close = (d - v).abs().amax(dim=1) <= settings.decide_tol
    judge = st.fresh[act]
    st.streak[act] = torch.where(judge, torch.where(close, st.streak[act] + 1, 0), st.streak[act])
    st.fresh[act] = False
    decided = ~bad & ~at_end & (settings.patience > 0) & (st.streak[act] >= max(settings.patience, 1))
    spent = ~bad & ~at_end & ~decided & (st.acc[act] + st.rej[act] >= settings.max_steps)
    st.status[act[bad]] = STATUS.index("non_finite")
    st.status[act[spent]] = STATUS.index("max_steps")
    ends = at_end | spent
    st.out[act[ends]] = d[ends]
    st.out[act[decided]] = v[decided]
    st.decided[act[decided]] = sigma[decided]
    return act[~(bad | ends | decided)]


def _stage_streak(streak, x, x_new, xs, ks, sigma, ds, pair, settings):
    """The decision streak (n,) carried through a step's stages: each evaluation of the step after
    its start (all stages but the first, and but the last for an FSAL pair, whose last stage is the
    new point, judged in `_finish`) extends the streak when D there is within decide_tol of the new
    point's vertex and resets it otherwise; a step that changes the vertex resets it first."""
    v = torch.where(x_new > 0, 1.0, -1.0).to(x.dtype)                            # (n, D)
    streak = torch.where((torch.where(x > 0, 1.0, -1.0).to(x.dtype) == v).all(dim=1), streak, 0)
    for j in range(1, pair.stages - (1 if pair.fsal else 0)):
        s = (sigma + pair.c[j] * ds).to(x.dtype)[:, None]                        # (n, 1)
        close = (xs[j] - s * ks[j] - v).abs().amax(dim=1) <= settings.decide_tol  # D(x_j, σ_j) near v
        streak = torch.where(close, streak + 1, 0)
    return streak


def _knee(sigma, knee):
    """The tolerance factor max(1, σ/σ_k) of `EngineSettings.sigma_knee` at σ (n,)."""
    return (sigma / knee).clamp(min=1.0)


def _knee_step(h, start, end, knee, order):
    """The controller's next step h (n,) from σ = start, shortened where its end lies at a tighter
    tolerance than the end of the step just judged (`end`): the local error grows as |h|^(q+1) and
    the tolerance shrinks as σ' does, so h × (tolerance there / here)^(1/(q+1))."""
    drop = _knee(start * torch.exp(h), knee) / _knee(end, knee)                  # (n,) <= 1 when tighter
    return h * drop.clamp(max=1.0) ** (1.0 / (order + 1))


def _attempt(D, st, act, pair, settings, t_end, k, chunk):
    """One step attempt of every row in `act` (each with its own step); updates the state."""
    x, f1, t = st.x[act], st.f[act], st.t[act]
    h = torch.maximum(torch.maximum(st.h[act], torch.full_like(t, -settings.h_max)), t_end - t)   # (n,) < 0
    sigma = t.exp()
    ds = sigma * torch.expm1(h)                                                  # (n,) Δσ < 0
    dsx = ds.to(x.dtype)[:, None]
    ks, xs = [f1], [x]
    for c, a in zip(pair.c[1:], pair.a[1:]):
        xs.append(x + dsx * sum(w * kj for w, kj in zip(a, ks) if w))
        ks.append(_rhs(D, xs[-1], sigma + c * ds, act, k, chunk))
    nan = ~torch.stack([torch.isfinite(kj).all(dim=1) for kj in ks[1:]]).all(dim=0)   # (n,) a stage met NaN/inf
    st.met_nan[act[nan]] = True                          # the row ends non-finite (`_finish`), whatever the step
    x_new = x + dsx * sum(w * kj for w, kj in zip(pair.b, ks) if w)              # (n, D)
    err = dsx * sum((w - w_hat) * kj for w, w_hat, kj in zip(pair.b, pair.b_hat, ks))
    ratio = error_ratio(err, x, x_new, settings.rtol, settings.atol)             # (n,)
    if settings.sigma_knee:
        ratio = ratio / _knee(sigma + ds, settings.sigma_knee)                  # tolerance × σ'/σ_k above σ_k
    ok = (ratio <= 1.0) & torch.isfinite(x_new).all(dim=1)
    st.nfe[act] += pair.stages - 1
    st.acc[act] += ok.long()
    st.rej[act] += (~ok).long()
    st.h[act] = next_step(h, ratio, pair.order, ok, settings.safety)
    if settings.sigma_knee:
        st.h[act] = _knee_step(st.h[act], torch.where(ok, sigma + ds, sigma), sigma + ds, settings.sigma_knee,
                               pair.order)
    t_new = torch.where(t + h - t_end < 1e-12, torch.full_like(t, t_end), t + h)
    good = act[ok]
    if settings.patience > 0:
        st.streak[good] = _stage_streak(st.streak[act], x, x_new, xs, ks, sigma, ds, pair, settings)[ok]
    st.x[good], st.t[good], st.fresh[good] = x_new[ok], t_new[ok], True
    if pair.fsal:
        st.f[good] = ks[-1][ok]
    else:
        st.have_f[good] = False


@torch.no_grad()
def solve(D, x0, sigma_start, settings=None, *, sigma_min=0.002, chunk_size=None, k=1):
    """Integrate the PF-ODE from σ = sigma_start to 0 for every row of x0 with the adaptive engine.

    Parameters
    ----------
    D : denoiser D(x (B, D), sigma (B,)) -> (B, D); per-row σ are passed.
    x0 : (B, D) float tensor at noise level sigma_start (> 0).
    settings : EngineSettings, a dict of overrides or None (the defaults).
    sigma_min : rows end at min(sigma_min, sigma_start) with one Euler step to σ = 0.
    chunk_size : rows per forward (None: all running rows at once).
    k : the number of models of a StackedDenoiser (1 otherwise).

    Returns
    -------
    EngineResult (endpoints and per-row decided σ, NFE, accepted / rejected steps, status).
    """
    settings = EngineSettings.of(settings)
    pair = PAIRS[settings.pair]
    t_end = math.log(min(float(sigma_min), float(sigma_start)))
    st = _State(x0, float(sigma_start), settings)
    act = torch.arange(x0.shape[0], device=x0.device)
    while act.numel():
        need = act[~st.have_f[act]]
        if need.numel():
            st.f[need] = _rhs(D, st.x[need], st.t[need].exp(), need, k, chunk_size)
            st.nfe[need] += 1
            st.have_f[need] = True
        act = _finish(st, act, settings, t_end)
        if act.numel():
            _attempt(D, st, act, pair, settings, t_end, k, chunk_size)
    return EngineResult(st.out, st.decided.cpu().numpy(), st.nfe.cpu().numpy(), st.acc.cpu().numpy(),
                        st.rej.cpu().numpy(), st.status.cpu().numpy())
