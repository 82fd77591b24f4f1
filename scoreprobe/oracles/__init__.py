"""Oracle denoisers: the perfect memorizer, the perfect generalizer, the local (patch) oracles and
the Gaussian (Wiener) baselines.

The first two are exact posterior means E[v | x] of a clean signed image v ∈ {-1,+1}^D observed as
x = v + σ·ε, ε ~ N(0, I), under a uniform prior on a finite set V of vertices:

    p(v | x) ∝ exp(-‖x - v‖²/2σ²) ∝ exp(a·v),   a = x/σ²   (‖v‖² = D for every vertex).

`EmpiricalDenoiser` takes V = the training set (the minimizer of the DSM loss on it);
`RuleDenoiser` takes V = all rule-valid images, computed in closed form (parity: a two-state
dynamic programme per group, equivalent to E[v_i|x] = (t_i + sΠ_{j≠i}t_j)/(1 + sΠ_j t_j) with
t = tanh(a)), by dynamic programming over counts (ExactK, RowK), or by enumeration (small
Latin squares and Sudoku). Every computation is done in log space, so the results are finite
for σ from 0.002 to 80 in float32 and float64. Both expose `log_density(x, σ)`, the exact
normalized log p_σ(x) = log(1/|V| Σ_v N(x; v, σ²I)), whose gradient is the score (D - x)/σ².
`LocalDenoiser` is the posterior mean of each pixel given only its patch (Kamb & Ganguli 2025;
see `scoreprobe.oracles.local`); it is a field, not the gradient of one density.
`GaussianDenoiser` is the baseline that knows only a mean and a covariance: the Wiener filter
μ + Σ(Σ + σ²I)⁻¹(x − μ) (`from_bits(train)`: the training set's moments, it cannot copy;
`from_rule(rule)`: the rule distribution's exact moments; see `scoreprobe.oracles.gaussian`).
"""
from scoreprobe.oracles.gaussian import GaussianDenoiser
from scoreprobe.oracles.local import LocalDenoiser
from scoreprobe.oracles.memorizer import EmpiricalDenoiser
from scoreprobe.oracles.rule import MAX_ENUMERATED, RuleDenoiser

__all__ = ["MAX_ENUMERATED", "EmpiricalDenoiser", "GaussianDenoiser", "LocalDenoiser", "RuleDenoiser"]
