"""train_sae: a sparse autoencoder trained on activation rows, deterministic by seed.

    sae = sp.train_sae(X, 64, arch="topk", k=4, seed=0)                       # X (n, d_in)
    sae = sp.train_sae(cache, 256, site="blocks.2.hook_resid_post", k=8)     # a cached Dataset's site

The recipe (SAELens's defaults where they apply; docs/features.md): inputs scaled by one constant c so that
the mean squared norm of the centred rows is d_in, and c folded back into b_enc, b_dec and the thresholds at
the end (exact: every activation here is positively homogeneous), so the returned SAE works on the raw rows;
W_dec rows unit norm (initialised random, W_enc = W_decᵀ, b_dec = the mean row), the gradient's component
along each row removed before every Adam step and the rows renormalised after it; the learning rate decays
linearly to 0 over the last 20% of the steps. Loss: ‖x − x̂‖² per row, plus
    standard    l1·Σ f
    topk, batchtopk   the AuxK loss (OpenAI, Gao et al. 2024): latents that fired on none of the last
                `dead_after` rows reconstruct the residual with their top k_aux = d_in/2, weight 1/32
    jumprelu    l0·Σ H(h − θ) through the straight-through estimator (features.jumprelu), bandwidth 0.05
BatchTopK's inference threshold: the running mean (rate 0.01) of the smallest activation kept per batch.
"""
import numpy as np
import torch

from scoreprobe.errors import ConfigError
from scoreprobe.limits import check_int
from scoreprobe.features import disk, jumprelu as jr
from scoreprobe.features.rows import site_rows
from scoreprobe.features.sae import ARCHS, SAE
from scoreprobe.progress import CountProgress

DEFAULTS = dict(steps=3000, batch_size=256, lr=2e-3, l1=1.0, l0=1.0, bandwidth=0.05, init_threshold=0.1,
                aux_coef=1 / 32, threshold_rate=0.01, decay_share=0.2)
MIN_THRESHOLD = 1e-6     # jumprelu's θ is trained directly (Adam steps in θ, not log θ) and kept above this


def train_sae(activations, d_sae, *, arch="topk", k=None, l1=None, l0=None, seed=0, steps=None,
              batch_size=None, lr=None, site=None, sae_steps=None, sigmas=None, token=None, progress=None,
              checkpoint=None, save_every=500):
    """A sparse autoencoder fitted to activation rows (see the module docstring for the recipe).

    activations : (n, d_in) tensor/array, or a cached Dataset (run_with_cache, cache_series, open_store) with
        site= a hook name; sae_steps / sigmas pick the store's checkpoints / σ (None: all), token= one token.
    d_sae : number of latents. arch : "topk" (default), "batchtopk", "jumprelu" or "standard" (L1).
    k : active latents per row for topk/batchtopk (default max(1, d_sae // 16)); l1 : standard's L1
        coefficient; l0 : jumprelu's L0 coefficient (on the scaled rows; defaults in DEFAULTS).
    seed : the initialisation and the batch order; the result is a function of (rows, settings, seed).
    progress : None (default: a bar on a terminal, else a stderr line every 30 s of training), True or False.
    checkpoint : a file path: the training state is written there atomically every `save_every` steps and at
        the end; a later call with the same rows and settings resumes from it (bit for bit the uninterrupted
        result; a finished state returns its SAE without training); other rows or settings: ConfigError
        (features.disk). None (default): nothing is written.
    Returns an SAE (scoreprobe.features.sae) in eval mode on the CPU, settings in `sae.config`."""
    X = site_rows(activations, site, sae_steps, sigmas, token)
    x = torch.as_tensor(X.values, dtype=torch.float32)                     # (n, d_in)
    cfg = _settings(x, d_sae, arch, k, l1, l0, steps, batch_size, lr)
    save_every = check_int(save_every, "save_every", 1, 10**9)
    print_ = None if checkpoint is None else disk.fingerprint(x, cfg, seed)
    state = None if checkpoint is None else disk.read_state(checkpoint, print_)
    gen = torch.Generator().manual_seed(int(seed))
    mean = x.mean(0)
    c = float(((x - mean) ** 2).sum(1).mean().div(x.shape[1]).sqrt())
    if not c > 0:
        raise ConfigError("the activation rows are all equal: there is nothing for an SAE to learn")
    xs = x / c
    sae = _init(SAE(x.shape[1], cfg["d_sae"], arch, cfg["k"]), mean / c, gen, cfg)
    keep = None if checkpoint is None else (lambda st: disk.write_state(checkpoint, dict(st, fingerprint=print_)))
    _fit(sae, xs, gen, cfg, progress, state, keep, save_every)
    _fold_scale(sae, c)
    sae.config = dict(cfg, seed=int(seed), scale=c, n_rows=int(x.shape[0]), site=X.attrs.get("site"), **_where(X))
    return sae.eval()


def _where(X):
    """{"step": s, "sigma": σ} for each of the rows' step / σ coordinates that has one value (a cache_series cell):
    where the SAE's rows came from, recorded in sae.config (and cfg.json) for the report's features section."""
    out = {}
    for dim in ("step", "sigma"):
        if dim in X.coords:
            values = np.unique(X[dim].values)
            if values.size == 1:
                out[dim] = values.item()
    return out


def _settings(x, d_sae, arch, k, l1, l0, steps, batch_size, lr):
    if arch not in ARCHS:
        raise ConfigError(f"arch must be one of {', '.join(ARCHS)}, got {arch!r}")
    if not (isinstance(d_sae, (int, np.integer)) and d_sae >= 1):
        raise ConfigError(f"d_sae must be a positive integer, got {d_sae!r}")
    if x.shape[0] < 2:
        raise ConfigError(f"an SAE needs at least 2 activation rows, got {x.shape[0]}")
    cfg = dict(DEFAULTS, arch=arch, d_sae=int(d_sae), d_in=int(x.shape[1]))
    for name, value in (("steps", steps), ("batch_size", batch_size)):
        if value is not None:
            if not (isinstance(value, (int, np.integer)) and value >= 1):
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
            cfg[name] = int(value)
    for name, value in (("lr", lr), ("l1", l1), ("l0", l0)):
        if value is not None:
            if not (isinstance(value, (int, float)) and np.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
            cfg[name] = float(value)
    if arch in ("topk", "batchtopk"):
        k = max(1, int(d_sae) // 16) if k is None else k
        if not (isinstance(k, (int, np.integer)) and 1 <= k <= d_sae):
            raise ConfigError(f"k must be an integer in [1, d_sae = {d_sae}], got {k!r}")
        cfg["k"] = int(k)
    elif k is not None:
        raise ConfigError(f"k is for arch 'topk' or 'batchtopk', not {arch!r} (use l1= or l0=)")
    else:
        cfg["k"] = None
    cfg["batch_size"] = min(cfg["batch_size"], int(x.shape[0]))
    return cfg


def _init(sae, b_dec, gen, cfg):
    with torch.no_grad():
        sae.W_dec.copy_(torch.randn(sae.d_sae, sae.d_in, generator=gen))
        sae.normalize_decoder()
        sae.W_enc.copy_(sae.W_dec.T)
        sae.b_dec.copy_(b_dec)
        if sae.arch == "jumprelu":
            sae.threshold.fill_(cfg["init_threshold"])
    return sae


def _fit(sae, xs, gen, cfg, progress, state=None, keep=None, save_every=500):
    """Adam on the scaled rows xs (n, d_in) for cfg['steps'] steps (see the module docstring), from `state`
    (features.disk) when given; `keep(state)` every `save_every` steps and at the end."""
    theta = torch.nn.Parameter(sae.threshold.clone()) if sae.arch == "jumprelu" else None
    params = list(sae.parameters()) + ([theta] if theta is not None else [])
    opt = torch.optim.Adam(params, lr=cfg["lr"])
    n, steps, bs = xs.shape[0], cfg["steps"], cfg["batch_size"]
    decay_from = int(steps * (1 - cfg["decay_share"]))
    since_fired = torch.zeros(sae.d_sae)                                   # rows since each latent last fired
    order, pos, start = torch.randperm(n, generator=gen), 0, 0
    if state is not None:
        since_fired, order, pos, start = _restore(state, sae, theta, opt, gen)
    bar = CountProgress(steps, start, "train_sae", progress)
    for i in range(start, steps):
        if pos + bs > n:
            order, pos = torch.randperm(n, generator=gen), 0
        x = xs[order[pos:pos + bs]]                                        # (B, d_in)
        pos += bs
        for group in opt.param_groups:
            group["lr"] = cfg["lr"] * min(1.0, (steps - i) / max(steps - decay_from, 1))
        loss, f = _loss(sae, x, theta, since_fired, cfg)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        _project_decoder_grad(sae)
        opt.step()
        sae.normalize_decoder()
        if theta is not None:
            theta.data.clamp_(min=MIN_THRESHOLD)
        fired = (f > 0).any(0)
        since_fired = torch.where(fired, torch.zeros_like(since_fired), since_fired + bs)
        bar.update()
        if i % 100 == 0:
            bar.set_postfix_str(f"loss {loss.item():.4g}")
        if keep is not None and (i + 1 == steps or (i + 1) % save_every == 0):
            keep(_snapshot(sae, theta, opt, gen, since_fired, order, pos, i + 1))
    bar.close()
    if theta is not None:
        sae.threshold.copy_(theta.detach())


def _snapshot(sae, theta, opt, gen, since_fired, order, pos, step):
    """Everything _fit needs to go on from `step` exactly as if it had not stopped."""
    return {"sae": {k: v.clone() for k, v in sae.state_dict().items()},
            "theta": None if theta is None else theta.detach().clone(), "adam": opt.state_dict(),
            "generator": gen.get_state(), "since_fired": since_fired.clone(), "order": order.clone(),
            "pos": int(pos), "step": int(step)}


def _restore(state, sae, theta, opt, gen):
    """Load a _snapshot into the live objects; returns (since_fired, order, pos, step)."""
    sae.load_state_dict(state["sae"])
    if theta is not None:
        theta.data.copy_(state["theta"])
    opt.load_state_dict(state["adam"])
    gen.set_state(state["generator"])
    return state["since_fired"], state["order"], state["pos"], state["step"]


def _loss(sae, x, theta, since_fired, cfg):
    """(loss, f) for one batch x (B, d_in) of scaled rows; theta: jumprelu's thresholds being trained."""
    h = sae.hidden_pre(x)                                                  # (B, d_sae)
    if sae.arch == "jumprelu":
        f = jr.jumprelu(h, theta, cfg["bandwidth"])
        sparsity = cfg["l0"] * jr.step(h, theta, cfg["bandwidth"]).sum(1).mean()
    else:
        f = sae.activation(h, batch=True)
        sparsity = cfg["l1"] * f.sum(1).mean() if sae.arch == "standard" else 0.0
    x_hat = sae.decode(f)
    loss = ((x_hat - x) ** 2).sum(1).mean() + sparsity
    if sae.arch in ("topk", "batchtopk"):
        loss = loss + cfg["aux_coef"] * _aux_k(sae, h, x - x_hat, since_fired, cfg)
        if sae.arch == "batchtopk":
            _update_threshold(sae, f, cfg["threshold_rate"])
    return loss, f


def _aux_k(sae, h, residual, since_fired, cfg):
    """AuxK: the dead latents' top k_aux reconstruct the residual (B, d_in); normalised by its variance."""
    dead = since_fired >= max(10 * cfg["batch_size"], 1000)                # (d_sae,)
    n_dead = int(dead.sum())
    if n_dead == 0:
        return torch.zeros(())
    k_aux = min(max(sae.d_in // 2, 1), n_dead)
    hd = torch.where(dead, h, torch.full_like(h, -torch.inf))
    top = torch.topk(hd, k_aux, dim=-1)
    f_aux = torch.zeros_like(h).scatter(-1, top.indices, torch.relu(top.values))
    err = residual.detach()
    denom = ((err - err.mean(0)) ** 2).sum(1).mean().clamp_min(1e-12)
    return ((f_aux @ sae.W_dec - err) ** 2).sum(1).mean() / denom


@torch.no_grad()
def _update_threshold(sae, f, rate):
    kept = f[f > 0]
    if kept.numel():
        low = kept.min()
        first = bool(sae.threshold[0] == 0)
        sae.threshold.copy_(low if first else (1 - rate) * sae.threshold + rate * low)


@torch.no_grad()
def _project_decoder_grad(sae):
    """Remove the gradient's component along each (unit) decoder row, so Adam moves along the sphere."""
    g, w = sae.W_dec.grad, sae.W_dec
    if g is not None:
        g.sub_((g * w).sum(1, keepdim=True) * w)


@torch.no_grad()
def _fold_scale(sae, c):
    """Make the SAE trained on x/c act on x: f -> c·f, b_enc, b_dec and thresholds times c; W_* unchanged."""
    sae.b_enc.mul_(c)
    sae.b_dec.mul_(c)
    sae.threshold.mul_(c)
