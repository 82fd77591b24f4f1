"""The decomposition's arithmetic from sufficient statistics, so every fit can be redone on a resample.

A cell of `decompose` (one σ and split) regresses the network's outputs y on the K oracle outputs
X_k over every (point, noise draw, coordinate). Everything the fits need is a sum over points of
per-point statistics (draws of one point summed together):

    gram (P, K, K) = X_p'X_p     xty (P, K) = X_p'y_p     yty (P,) = y_p'y_p     ysum (P, D) = Σ_draws y_p
    xx (P,) = x_p'x_p            xy (P,) = x_p'y_p        n_rows (P,) = draws of the point (0: padding)
    affine (P,) = ‖y_p − (A x_p + b)‖², the affine map fitted on the other half of the points (held out)

so a resample of points with multiplicities m (P,) gives G = Σ m_p gram_p etc., and

    ss_tot  = Σ m yty − ‖Σ m ysum‖² / Σ m n_rows        (D − mean D, the mean per coordinate)
    r2_k    = 1 − (yty − 2 xty_k + G_kk) / ss_tot       (oracle alone, no fit)
    r2_shrink = 1 − (yty − xy²/xx) / ss_tot              (the best c·x: a linear shrinkage of the input)
    distance_jk = (G_jj + G_kk − 2 G_jk) / ss_tot         (how far apart two oracles are, in the network's units)

The joint least-squares fit is the minimum-norm solution of G w = xty (eigen-directions of G below
RCOND² of the largest dropped: RCOND on the singular values of X); the mixture (simplex) fit is
min w'Gw − 2 xty'w over w ≥ 0, Σ w = 1, solved exactly by a primal active-set method (`simplex_fit`),
batched over resamples by `simplex_batch` (one solve on the point estimate's support, the active
set only where that support is not optimal).
"""
import numpy as np

RCOND = 1e-6          # joint fit: directions of X with singular value < RCOND · largest are dropped
_TOL = 1e-10          # active set: feasibility / optimality tolerance, relative to max diag(G)


def pooled(stats, m):
    """Weighted sums of per-point statistics. stats: dict of arrays (..., P, ...) with the point axis
    at position `stats_axis` = the axis right after the leading cell dims, m: (B, P) multiplicities.

    Each stats[k] has shape (C, P, *rest); returns {k: (C, B, *rest)}."""
    return {k: np.einsum("bp,cp...->cb...", m, v) for k, v in stats.items()}


def ss_total(s):
    """Σ (y − mean y)² over rows and coordinates from pooled sums (any leading shape)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return s["yty"] - (s["ysum"] ** 2).sum(-1) / s["n_rows"]


def r2_alone(s, ss_tot):
    """r² of each oracle alone: (…, K). NaN where ss_tot is not positive (constant output)."""
    diag = np.diagonal(s["gram"], axis1=-2, axis2=-1)
    ss_res = s["yty"][..., None] - 2 * s["xty"] + diag
    return _r2(ss_res, ss_tot[..., None])


def r2_shrink(s, ss_tot):
    """r² of the best linear shrinkage c·x of the input (…,); c = xy/xx."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return _r2(s["yty"] - s["xy"] ** 2 / s["xx"], ss_tot)


def r2_affine(s, ss_tot):
    """Held-out r² of the network's own affine fit (…,) from the per-point held-out errors `affine`."""
    return _r2(s["affine"], ss_tot)


def distance(s, ss_tot):
    """‖D_j − D_k‖² / ‖D − mean D‖²: (…, K, K), the oracles' mutual distance in the network's units."""
    g = s["gram"]
    diag = np.diagonal(g, axis1=-2, axis2=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = (diag[..., :, None] + diag[..., None, :] - 2 * g) / ss_tot[..., None, None]
    return np.where(ss_tot[..., None, None] > 0, np.clip(d, 0, None), np.nan)


def _r2(ss_res, ss_tot):
    with np.errstate(invalid="ignore", divide="ignore"):
        r = 1.0 - np.clip(ss_res, 0, None) / ss_tot
    return np.where(ss_tot > 0, r, np.nan)


def fit_error(gram, xty, yty, w):
    """‖y − X w‖² from the statistics (clipped at 0 against rounding): (...,)."""
    return np.clip(yty - 2 * (xty * w).sum(-1) + np.einsum("...k,...kl,...l->...", w, gram, w), 0, None)


def joint_fit(gram, xty):
    """Minimum-norm least-squares weights (K,) of y on X from G = X'X (K, K) and X'y (K,)."""
    vals, vecs = np.linalg.eigh(gram)
    keep = vals > (RCOND ** 2) * max(vals.max(), 0.0)
    if not keep.any():
        return np.zeros(len(xty))
    v = vecs[:, keep]
    return v @ ((v.T @ xty) / vals[keep])


def condition(gram):
    """Condition number of X from G = X'X: sqrt(λ_max/λ_min) (≥ ~1e8 means numerically singular)."""
    vals = np.linalg.eigvalsh(gram)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.sqrt(vals.max() / vals.min())) if vals.min() > 0 else np.inf


def _kkt(gram, xty, free):
    """Equality-constrained minimum on the free set: (w (K,), ν) with G_FF w_F + ν 1 = b_F, Σ w_F = 1."""
    f = np.flatnonzero(free)
    n = len(f)
    a = np.zeros((n + 1, n + 1))
    a[:n, :n], a[:n, n], a[n, :n] = gram[np.ix_(f, f)], 1.0, 1.0
    sol = np.linalg.lstsq(a, np.append(xty[f], 1.0), rcond=None)[0]
    w = np.zeros(len(xty))
    w[f] = sol[:n]
    return w, sol[n]


def simplex_fit(gram, xty, start=None):
    """min w'Gw − 2 b'w over the simplex (w ≥ 0, Σ w = 1), exact: a primal active-set method started
    at `start` (a feasible w; default the best single oracle); on the rare degenerate cycle, the
    enumeration of supports (`simplex_enumerated`). gram (K, K) PSD, xty (K,) -> w (K,)."""
    k = len(xty)
    tol = _TOL * max(float(np.abs(np.diagonal(gram)).max()), 1e-300)
    if start is None:
        start = np.eye(k)[np.argmin(np.diagonal(gram) - 2 * xty)]
    w = np.asarray(start, np.float64).copy()
    free = w > 0
    for _ in range(20 * k):
        target, nu = _kkt(gram, xty, free)
        block = free & (target < -1e-13)
        if not block.any():                                          # the full step stays feasible
            w = np.where(free, np.clip(target, 0, None), 0.0)
            w /= w.sum()
            lam = gram @ w - xty + nu                                 # multipliers of w_i ≥ 0
            out = ~free
            if not out.any() or lam[out].min() >= -tol:
                return w
            free[np.flatnonzero(out)[np.argmin(lam[out])]] = True
            continue
        ratios = w[block] / (w[block] - target[block])               # where each blocking w_i reaches 0
        j = np.argmin(ratios)
        w = np.clip(w + ratios[j] * (target - w), 0, None)
        w[np.flatnonzero(block)[j]] = 0.0
        free = free & (w > 0)
        if not free.any():
            break
        w /= w.sum()
    return simplex_enumerated(gram, xty)


def simplex_enumerated(gram, xty):
    """The simplex fit by enumerating supports (at most 2^K − 1 equality-constrained problems): the
    reference for `simplex_fit`. gram (K, K), xty (K,) -> w (K,)."""
    import itertools
    k = len(xty)
    yty = 0.0                                       # the error up to the constant y'y
    best, best_w = np.inf, None
    for size in range(1, k + 1):
        for support in itertools.combinations(range(k), size):
            free = np.zeros(k, bool)
            free[list(support)] = True
            w, _ = _kkt(gram, xty, free)
            if w[free].min() < -1e-12:
                continue
            w = np.clip(w, 0, None)
            w /= w.sum()
            err = yty - 2 * xty @ w + w @ gram @ w
            if err < best - 1e-15 * max(1.0, abs(best) if np.isfinite(best) else 1.0):
                best, best_w = err, w
    return best_w


def simplex_batch(gram, xty, w0):
    """simplex_fit for a batch: gram (N, K, K), xty (N, K), w0 (K,) a solution of a nearby problem (the
    point estimate). One batched solve on w0's support; the active set only where that is not optimal."""
    n, k = xty.shape
    f = np.flatnonzero(w0 > 0)
    a = np.zeros((n, len(f) + 1, len(f) + 1))
    a[:, :len(f), :len(f)] = gram[:, f[:, None], f[None, :]]
    a[:, :len(f), -1] = a[:, -1, :len(f)] = 1.0
    rhs = np.concatenate([xty[:, f], np.ones((n, 1))], axis=1)
    sol = np.einsum("nij,nj->ni", np.linalg.pinv(a, rcond=1e-13), rhs)
    w = np.zeros((n, k))
    w[:, f] = sol[:, :len(f)]
    lam = np.einsum("nkl,nl->nk", gram, w) - xty + sol[:, -1:]
    tol = _TOL * np.abs(np.diagonal(gram, axis1=1, axis2=2)).max(1, keepdims=True)
    out = np.ones(k, bool)
    out[f] = False
    ok = (w[:, f] >= -1e-13).all(1) & ((lam[:, out] >= -tol).all(1) if out.any() else True)
    ok &= np.isfinite(w).all(1)
    w = np.clip(w, 0, None)
    w /= w.sum(1, keepdims=True)
    for i in np.flatnonzero(~ok):
        w[i] = simplex_fit(gram[i], xty[i])
    return w


AFFINE_LAMBDAS = np.geomspace(1e-6, 1e2, 33)   # ridge penalties tried, × the mean squared singular value of x


def affine_fit(x, y):
    """The affine map y ≈ x·W + b by ridge regression (intercept unpenalized), the penalty chosen by generalized
    cross-validation on these rows alone among AFFINE_LAMBDAS (λ → 0 is least squares). x, y: (rows, D) ->
    (W (D, D), b (D,)). With 64 rows and 37 parameters per coordinate, least squares pays ≈ 2.4× the residual
    on held-out rows; the ridge keeps what the data support (shipped model, step 36 000, σ = 1: held-out r²
    0.10 by least squares, 0.44 by this fit)."""
    mx, my = x.mean(0), y.mean(0)
    u, sv, vt = np.linalg.svd(x - mx, full_matrices=False)
    uty = u.T @ (y - my)
    best, lam_best = np.inf, 0.0
    for lam in AFFINE_LAMBDAS * max(float((sv ** 2).mean()), 1e-300):
        f = sv ** 2 / (sv ** 2 + lam)
        dof = f.sum() + 1
        if dof >= len(x):
            continue
        gcv = (((y - my) - u @ (f[:, None] * uty)) ** 2).sum() / (1 - dof / len(x)) ** 2
        if gcv < best:
            best, lam_best = gcv, lam
    with np.errstate(divide="ignore", invalid="ignore"):
        shrink = np.where(sv > 0, sv / (sv ** 2 + lam_best), 0.0)
    W = vt.T @ (shrink[:, None] * uty)
    return W, my - mx @ W


def affine_heldout_sse(y, x):
    """The network's own linear part, scored on held-out points: per point, ‖y − (x·W + b)‖² summed over its
    draws, with (W, b) = `affine_fit` on the OTHER half of the points (points split by the parity of their
    index; two folds, so every point is scored once, by a map that never saw it).

    y, x: (P, n_noise, D) -> (P,); NaN for every point when a half holds fewer rows (points × draws) than the
    map's D + 1 parameters per coordinate (no baseline)."""
    p, n, d = y.shape
    out = np.full(p, np.nan)
    if (p // 2) * n < d + 1:
        return out
    fold = np.arange(p) % 2
    for k in (0, 1):
        fit_rows, score = fold != k, fold == k
        W, b = affine_fit(x[fit_rows].reshape(-1, d), y[fit_rows].reshape(-1, d))
        out[score] = ((y[score] - (x[score] @ W + b)) ** 2).sum((1, 2))
    return out
