"""`scoreprobe clocks` and `scoreprobe dsm`: one row per checkpoint."""
import click

from scoreprobe.cli.app import cli
from scoreprobe.defaults import DEFAULT_N_STEPS
from scoreprobe.limits import MAX_ITEMS, MAX_SAMPLES, MAX_SIGMAS
from scoreprobe.cli.common import (ODE_STEPS, SEED, autocast_option, check_figure, check_writable, choose_steps,
                                   default_output, models_per_pass_option, on_scheduler, parse_steps, plot_file,
                                   require_denoiser, save_figure, scheduler_of, steps_in_store, store_line,
                                   sweep_options, with_stored)
from scoreprobe.cli.source import source_options


def _check_outputs(out, plot):
    """--out and --plot must be writable; checked before anything is computed or replaced."""
    check_writable(out, "--out", store=True)
    check_figure(plot, "--plot")


# ---------------------------------------------------------------------------------------------
# clocks
# ---------------------------------------------------------------------------------------------

CLOCK_COLUMNS = (("rule_acc", "rule_acc"), ("group_acc", "group_acc"), ("novel_ratio", "novel"),
                 ("heldout_hit", "heldout"), ("mem_ratio", "memorized"), ("violating_ratio", "violating"),
                 ("invalid_ratio", "non-finite"), ("off_vertex", "off_vertex"))


def _fmt_tau(value):
    import math
    return "not reached" if value is None or not math.isfinite(value) else f"{value:.0f}"


def _fmt_ci(a, key):
    ci = a.get(key + "_ci")
    if not ci:
        return ""
    lo, hi = (_fmt_tau(v) for v in ci)
    return f" [{round(100 * a['ci'])}% CI {lo} – {hi}]"


def _sampler_bias(n_steps):
    from scoreprobe.defaults import SAMPLER_BIAS as b
    if n_steps != b["n_steps"]:
        return " (bias not measured for this step count; bench/bench_sampler_bias.py measures it)"
    return (f" (on the shipped series {b['vs_n_steps']} steps give rule_acc +{100 * b['rule_acc']:.1f} and "
            f"mem_ratio +{100 * b['mem_ratio']:.1f} points; docs/definitions.md)")


def _clock_rows(ds):
    yield f"{'step':>8s}" + "".join(f"{h:>11s}" for _, h in CLOCK_COLUMNS)
    for i in range(ds.sizes["step"]):
        row = ds.isel(step=i)
        yield f"{int(row.step):>8d}" + "".join(f"{float(row[v]):>11.3f}" for v, _ in CLOCK_COLUMNS)
    yield ("(novel + heldout + memorized + violating + non-finite = 1; rule_acc = novel + heldout + memorized; "
           "non-finite: NaN/inf endpoints (the state `invalid`); off_vertex is a flag; docs/definitions.md)")


def _clock_summary(a):
    """Lines for τ_rule, τ_novel, τ_mem and the window, from the attrs written by `clocks`."""
    yield f"tau_rule  = {_fmt_tau(a['tau_rule'])}{_fmt_ci(a, 'tau_rule')}   rule_acc reaches {a['rule_threshold']}"
    yield (f"tau_novel = {_fmt_tau(a['tau_novel'])}{_fmt_ci(a, 'tau_novel')}   novel_valid reaches "
           f"{a['novel_threshold']:.3f} ({a['rule_threshold']} x the perfect generalizer's)")
    yield f"tau_mem   = {_fmt_tau(a['tau_mem'])}{_fmt_ci(a, 'tau_mem')}   mem_ratio reaches {a['mem_threshold']}"
    if not a["window_open"]:
        status = str(a.get("window_status") or "")            # the store's own reason (stats.taus.window_status)
        yield ("innovation window: " + status if status.startswith("closed")
               else "innovation window: closed (no step where rule_acc >= threshold and mem_ratio < threshold)")
        return
    spans = ", ".join(f"{_fmt_tau(lo)}–{_fmt_tau(hi)}" for lo, hi in a["window_intervals"])
    width = f"log10 width {a['window_log10_width']:.2f}"
    if a.get("window_log10_width_ci"):
        width += f" [{a['window_log10_width_ci'][0]:.2f}, {a['window_log10_width_ci'][1]:.2f}]"
    end = " (still open at the last checkpoint)" if a["window_hi_censored"] else ""
    yield f"innovation window: open, steps {spans}{end}, {width}"


SAMPLER_NAMES = ("adaptive", "heun", "euler", "edm-stochastic", "ddim", "ancestral")   # scoreprobe.ode.samplers.SAMPLERS
CLI_NAMES = {"s_churn": "--s-churn", "s_noise": "--s-noise", "s_tmin": "--s-tmin", "s_tmax": "--s-tmax",
             "eta": "--eta"}


def sampler_options(fn):
    """--sampler and its parameters --s-churn, --s-noise, --s-tmin, --s-tmax, --eta (checked by `sampler_of`)."""
    helps = {"s_churn": "EDM churn S_churn >= 0 (edm-stochastic; required there; EDM used 10-80).",
             "s_noise": "EDM S_noise > 0 (edm-stochastic; default 1; EDM used up to 1.007).",
             "s_tmin": "Churn only where sigma >= S_tmin (edm-stochastic; default 0).",
             "s_tmax": "Churn only where sigma <= S_tmax (edm-stochastic; default inf).",
             "eta": "DDIM eta in [0, 1] (ddim; default 0 = the Euler PF-ODE; 1 = ancestral)."}
    for param in reversed(CLI_NAMES):
        fn = click.option(CLI_NAMES[param], param, type=float, default=None, help=helps[param])(fn)
    return click.option("--sampler", "sampler_name", type=click.Choice(SAMPLER_NAMES), default="heun",
                        help="How DiT samples are drawn: the deterministic PF-ODE (heun, euler; adaptive: the engine "
                             "at defaults.SAMPLE_ENGINE, --n-steps unused), EDM's stochastic "
                             "sampler, DDIM-eta or ancestral (docs/definitions.md, \"Samplers\"). Recorded in the "
                             "store: a store made with one sampler is not extended with another.")(fn)


def sampler_of(name, **params):
    """The samplers.Sampler of the options, checked before anything is loaded (a ConfigError naming the
    CLI options: one line, exit 2)."""
    from scoreprobe.ode.samplers import Sampler, resolve_params
    resolve_params(name, params, names=CLI_NAMES)
    return Sampler(name, **params)


@cli.command()
@click.option("--n-samples", type=click.IntRange(1, MAX_SAMPLES), default=1000,
              help="Samples per checkpoint (fewer are faster but make the 0.9 threshold noisy).")
@click.option("--seed", type=SEED, default=0, help="Seed of the initial noise (the same at every step).")
@click.option("--n-steps", type=ODE_STEPS, default=DEFAULT_N_STEPS, help="Sampler steps (DiT).")
@sampler_options
@sweep_options("clocks.zarr", "Write the clock and state figure here.", "ODE batch rows (memory bound).")
@models_per_pass_option()
@autocast_option()
@source_options
def clocks(source, n_samples, seed, n_steps, sampler_name, s_churn, s_noise, s_tmin, s_tmax, eta, steps, out,
           overwrite, plot, chunk_size, device, models_per_pass, autocast, scheduler, dask_local):
    """Rule accuracy and memorization at every checkpoint of SOURCES (default: the shipped
    series; or a run directory, checkpoint files, a glob or a folder of them: see --dataset, --set),
    with τ_rule, τ_mem and the innovation window. Several run directories: each is measured into
    its own store (<run>.clocks.zarr here, as for one run; --out DIR: DIR/<run>.zarr, the .zarr
    suffix of DIR dropped) and their τ compared as by `scoreprobe compare`."""
    from scoreprobe.stats.clocks import clocks as run_clocks
    parse_steps(steps, words=("all", "auto"))   # a malformed --steps fails before anything is loaded
    sampler = sampler_of(sampler_name, s_churn=s_churn, s_noise=s_noise, s_tmin=s_tmin, s_tmax=s_tmax, eta=eta)
    scheduler = scheduler_of(scheduler, dask_local)
    if getattr(source, "run_dirs", None):
        kw = dict(n_samples=n_samples, seed=seed, n_steps=n_steps, device=device, chunk_size=chunk_size,
                  models_per_pass=models_per_pass, autocast=autocast, sampler=sampler)
        with on_scheduler(scheduler):
            return _clocks_of_runs(source.run_dirs, steps, out, overwrite, plot, **kw)
    s = source()
    chosen = choose_steps(steps, s)
    out, plot = default_output(s, "clocks.zarr", out), plot_file(plot, s, "clocks.png")
    _check_outputs(out, plot)
    reused = steps_in_store(out, overwrite)
    chosen = with_stored(chosen, steps, s, reused)
    click.echo(f"clocks of {s.path} ({getattr(s, 'kind_label', s.kind)}, {len(chosen)} of {len(s.steps)} checkpoints), "
               f"{n_samples} samples, "
               f"seed {seed}, on {device}" + ("" if len(chosen) == len(s.steps) else "; --steps all for every one"))
    if s.kind == "dit":
        click.echo(f"sampler: {sampler.describe()}" + ("" if sampler_name == "adaptive" else f", {n_steps} steps")
                   + (_sampler_bias(n_steps) if sampler_name == "heun" else ""))
    with on_scheduler(scheduler):
        ds = run_clocks(s, n_samples=n_samples, seed=seed, n_steps=n_steps, device=device, steps=chosen,
                        out=out, overwrite=overwrite, chunk_size=chunk_size, models_per_pass=models_per_pass,
                        autocast=autocast, sampler=sampler)
    for line in _clock_rows(ds):
        click.echo(line)
    for line in _clock_summary(ds.attrs):
        click.echo(line)
    if out is not None:
        click.echo(store_line(out, list(ds.step.values), reused))
    if plot:
        _clocks_figure(ds, plot)
        click.echo(f"wrote {plot}")


def _clocks_of_runs(run_dirs, steps, out, overwrite, plot, **kw):
    """`clocks RUN1 RUN2 ...`: each run measured into its own store (OUT/<run>.zarr with --out, else
    <run>.clocks.zarr here, as `clocks RUN` writes it: scoreprobe.sweep.outputs), then the compare table
    (and with --plot the overlaid curves, compare.png for a bare --plot)."""
    from pathlib import Path

    from scoreprobe.cli.compare import table_lines
    from scoreprobe.errors import ConfigError
    from scoreprobe.loading.series import load_series
    from scoreprobe.sweep.outputs import run_output
    from scoreprobe.stats.clocks import clocks as run_clocks
    from scoreprobe.stats.compare import compare
    names = [Path(r).resolve().name for r in run_dirs]
    if len(set(names)) != len(names):
        raise ConfigError(f"the run directories must have different names, got {', '.join(names)}")
    out = None if out is None else str(out).removesuffix(".zarr")   # a folder of stores, not a store
    stores = [str(run_output(r, "clocks.zarr")) if out is None else str(Path(out) / f"{n}.zarr")
              for r, n in zip(run_dirs, names)]
    plot = plot_file(plot, None, "compare.png")
    series = [load_series(r) for r in run_dirs]                 # every run read before any work
    chosen = [choose_steps(steps, s) for s in series]
    _check_outputs(out, plot)
    for store in stores:
        check_writable(store, "--out", store=True)
    results = []
    for name, s, ch, store in zip(names, series, chosen, stores):
        reused = steps_in_store(store, overwrite)
        ch = with_stored(ch, steps, s, reused)
        click.echo(f"clocks of {s.path} ({s.kind}, {len(ch)} of {len(s.steps)} checkpoints), {kw['n_samples']} "
                   f"samples, seed {kw['seed']}")
        ds = run_clocks(s, steps=ch, out=store, overwrite=overwrite, **kw)
        for line in _clock_summary(ds.attrs):
            click.echo("  " + line)
        click.echo("  " + store_line(store, list(ds.step.values), reused))
        results.append(ds)
    cmp = compare(results, names=names)
    for line in table_lines(cmp):
        click.echo(line)
    if plot:
        from scoreprobe.viz.compare import plot_compare
        save_figure(plot_compare(cmp), plot, dpi=120)
        click.echo(f"wrote {plot}")


def _clocks_figure(ds, path):
    from scoreprobe.viz import new_figure, plot_clocks, plot_states
    fig = new_figure((13.5, 4.2))
    ax1, ax2 = fig.subplots(1, 2, width_ratios=(1.15, 1))
    plot_clocks(ds, ax=ax1)
    plot_states(ds, ax=ax2)
    save_figure(fig, path, dpi=120)


# ---------------------------------------------------------------------------------------------
# dsm
# ---------------------------------------------------------------------------------------------

CLI_HELDOUT = 256   # the command's held-out cap (the API's is 512): defaults sized for about a minute on 2 cores

@cli.command()
@click.option("--sigmas", type=click.IntRange(1, MAX_SIGMAS), default=20, help="Log-spaced noise levels in [0.002, 80].")
@click.option("--n-noise", type=click.IntRange(1, 1 << 16), default=4, help="Noise draws per item (shared by all).")
@click.option("--n-train", type=click.IntRange(0, MAX_ITEMS), default=None, help="Training items [default: all].")
@click.option("--n-heldout", type=click.IntRange(0, MAX_ITEMS), default=None,
              help=f"Held-out items [default: all, at most {CLI_HELDOUT}].")
@click.option("--seed", type=SEED, default=0, help="Seed of the noise bank.")
@sweep_options("dsm.zarr", "Write the loss and gap figure here.", "Denoiser rows per call (memory bound).")
@models_per_pass_option()
@source_options
def dsm(source, sigmas, n_noise, n_train, n_heldout, seed, steps, out, overwrite, plot, chunk_size, device,
        models_per_pass, scheduler, dask_local):
    """DSM loss by σ for training vs held-out items at every checkpoint of SOURCES (default: the
    shipped series; or a run directory, checkpoint files, a glob or a folder of them), with the memorizer and rule-oracle references; prints the mean over σ in [0.2, 2]
    (finite items only) with the gap's standard error, the smallest σ where the gap is significant
    (z > 3), and the number of NaN/inf per-item losses when there are any."""
    from scoreprobe.probes.dsm import dsm_by_sigma
    parse_steps(steps, words=("all", "auto"))
    scheduler = scheduler_of(scheduler, dask_local)
    s = source()
    require_denoiser(s, "dsm")
    chosen = choose_steps(steps, s)
    n_heldout = min(len(s.dataset.heldout), CLI_HELDOUT) if n_heldout is None else n_heldout
    out, plot = default_output(s, "dsm.zarr", out), plot_file(plot, s, "dsm.png")
    _check_outputs(out, plot)
    reused = steps_in_store(out, overwrite)
    click.echo(f"DSM loss of {s.path} ({len(chosen)} of {len(s.steps)} checkpoints), {sigmas} σ in [0.002, 80], "
               f"{n_noise} noise draws, {n_heldout} held-out items, seed {seed}, on {device}"
               + _full_dsm_hint(chosen, s, sigmas, n_noise, n_heldout))
    with on_scheduler(scheduler):
        ds = dsm_by_sigma(s, sigmas=sigmas, n_noise=n_noise, n_train=n_train, n_heldout=n_heldout, seed=seed,
                          chunk_size=chunk_size, steps=chosen, out=out, overwrite=overwrite, device=device,
                          models_per_pass=models_per_pass)
    _dsm_table(ds)
    if out is not None:
        click.echo(store_line(out, list(ds.step.values), reused))
    if plot:
        _dsm_figure(ds, plot)
        click.echo(f"wrote {plot}")


def _full_dsm_hint(chosen, s, sigmas, n_noise, n_heldout):
    """The options of the full-size run when the defaults (sized for about a minute on 2 cores) are in use."""
    small = len(chosen) < len(s.steps) or sigmas < 40 or n_noise < 8 or n_heldout < min(512, len(s.dataset.heldout))
    return "; the full run: --steps all --sigmas 40 --n-noise 8 --n-heldout 512" if small else ""


def _dsm_table(ds, band=(0.2, 2.0)):
    """Per step: band means of the train / held-out loss (finite items), the gap ± its SE, the
    smallest σ with gap z > 3 (σ*) and, when any, the count of non-finite per-item losses (all σ);
    then the two oracles."""
    from scoreprobe.probes.dsm_gap import Z_SIGNIFICANT, gap_stats
    from scoreprobe.stats.dsm_stats import dsm_summary
    sig = ds.sigma.values
    if not ((sig >= band[0]) & (sig <= band[1])).any():   # a coarse --sigmas grid: average over all of it
        band = (float(sig.min()), float(sig.max()))
    n_tr, n_ho = int((ds.split == "train").sum()), int((ds.split == "heldout").sum())
    bad = (ds["n_nonfinite_train"] + ds["n_nonfinite_heldout"]).sum("sigma")     # ([step])
    show_bad = bool((bad > 0).any())
    click.echo(f"mean DSM loss over σ in [{band[0]}, {band[1]}] ({n_tr} training / {n_ho} held-out items, "
               f"finite losses only); se = standard error of the gap; σ* = smallest σ with gap z > {Z_SIGNIFICANT:g}")
    click.echo(f"{'step':>10s}{'train':>10s}{'heldout':>10s}{'gap':>10s}{'se':>9s}{'σ*':>9s}"
               + (f"{'nonfinite':>10s}" if show_bad else ""))
    summ = dsm_summary(ds, band)
    for i in range(summ.sizes.get("step", 1)):
        pick = (lambda a: a.isel(step=i)) if "step" in summ.dims else (lambda a: a)
        row = pick(summ)
        label = f"{int(row.step):>10d}" if "step" in row.coords else f"{'model':>10s}"
        extra = f"{int(pick(bad)):>10d}" if show_bad else ""
        click.echo(_dsm_row(label, row, float(pick(ds["first_significant_sigma"]))) + extra)
    for var, name in (("mem_loss", "memorizer"), ("rule_loss", "rule")):
        if var in ds:
            star = gap_stats(ds[var].values, ds.split.values, ds.sigma.values)["first_significant_sigma"]
            click.echo(_dsm_row(f"{name:>10s}", dsm_summary(ds, band, var=var), float(star)))


def _dsm_row(label, row, sigma_star):
    """One table line: label, train, heldout, gap, se and σ* ('-' when no σ is significant)."""
    star = f"{sigma_star:>9.3g}" if sigma_star == sigma_star else f"{'-':>9s}"
    return (label + "".join(f"{float(row[v]):>10.4f}" for v in ("train", "heldout"))
            + f"{float(row.gap):>+10.4f}{float(row.gap_se):>9.4f}" + star)


def _dsm_figure(ds, path):
    from scoreprobe.viz import new_figure, plot_dsm, plot_dsm_gap
    multi = "step" in ds.dims and ds.sizes["step"] > 1
    fig = new_figure((12 if multi else 6.2, 4.4))
    axes = fig.subplots(1, 2 if multi else 1)
    plot_dsm(ds, ax=axes[0] if multi else axes)
    if multi:
        plot_dsm_gap(ds, ax=axes[1])
    save_figure(fig, path, dpi=120)
