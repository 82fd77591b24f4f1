"""`scoreprobe train` (and `plot-log`): making checkpoint series; `scoreprobe info` describes them (cli/info.py)."""
import warnings

import click

from scoreprobe.cli.app import cli
from scoreprobe.cli.common import SEED, check_writable, device_option, figure_path, save_figure


# ---------------------------------------------------------------------------------------------
# train
# ---------------------------------------------------------------------------------------------

def _say(text):
    """A line of train's own chatter (its header, 'done:'): silenced by -q, as its progress is."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or not ctx.find_root().params.get("quiet"):
        click.echo(text)


def _rule_spec(rule, G, k, n, layout, rule_seed, shape):
    """Rule options -> a rule spec dict (validated by building the rule)."""
    from scoreprobe.data.rules import rule_from_spec
    H, W = _parse_shape(shape)
    specs = {"parity": {"name": "parity", "G": G, "shape": [H, W], "layout": layout, "seed": rule_seed},
             "exactk": {"name": "exactk", "k": k, "shape": [H, W]},
             "rowk": {"name": "rowk", "k": k, "shape": [H, W]},
             "latin": {"name": "latin", "n": n}, "sudoku": {"name": "sudoku", "n": n}}
    spec = rule_from_spec(specs[rule]).spec()
    return spec


def _parse_shape(text):
    try:
        H, W = (int(t) for t in text.lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"expected HxW such as 6x6, got {text!r}", param_hint="--shape")
    return H, W


FIRST_CHECKPOINT_HELP = ("First step of the log-spaced checkpoints (after step 0) [default: min(total_steps / 72, "
                         "48000 / batch_size), rounded: the grid spans at most 1.86 decades and starts where the "
                         "shipped series' clocks begin to move (500 steps at batch 96), e.g. 500 for 36000 steps at "
                         "batch 96, 42 for 3000 at 128; a rerun keeps the run's own; docs/definitions.md].")


def _train_options(fn):
    """One click option per TrainConfig field (except `rule`), defaults from the dataclass."""
    import dataclasses
    import inspect
    import re
    from scoreprobe.models.order import TOKEN_ORDERS
    from scoreprobe.training.config import LR_SCHEDULES, TrainConfig
    helps = dict(re.findall(r"^\s+(\w+): .*?# (.+)$", inspect.getsource(TrainConfig), re.M))  # field comments
    for f in reversed(dataclasses.fields(TrainConfig)):
        if f.name == "rule":
            continue
        if f.name == "extra_checkpoints":
            fn = click.option("--extra-checkpoints", type=str, default="", show_default=False, callback=_step_list,
                              metavar="S1,S2,...",
                              help=helps.get(f.name) + " [default: none]")(fn)
            continue
        default = f.default
        flag = "--" + f.name.replace("_", "-")
        if isinstance(default, bool):
            fn = click.option(flag + "/--no-" + flag[2:], default=default, show_default=True,
                              help=helps.get(f.name))(fn)
        else:
            typ = int if f.name in ("hidden_size", "depth", "num_heads", "first_checkpoint") else type(default)
            typ = click.Choice(LR_SCHEDULES) if f.name == "lr_schedule" else typ
            typ = click.Choice(TOKEN_ORDERS) if f.name == "token_order" else typ
            typ = SEED if f.name.endswith("seed") else typ
            help_text = FIRST_CHECKPOINT_HELP if f.name == "first_checkpoint" else helps.get(f.name)
            fn = click.option(flag, type=typ, default=default, show_default=default is not None, help=help_text)(fn)
    return fn


def _step_list(ctx, param, text):
    """'50,100,200' -> [50, 100, 200] (TrainConfig checks the range and the order); '' -> []."""
    try:
        return [int(v) for v in text.split(",") if v.strip()] if text.strip() else []
    except ValueError:
        raise click.BadParameter(f"expected comma-separated steps such as 50,100,200, got {text[:40]!r}") from None


@cli.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--rule", type=click.Choice(["parity", "exactk", "rowk", "latin", "sudoku"]), default="parity")
@click.option("--G", "G", type=int, default=2, help="Parity group size.")
@click.option("--k", type=int, default=3, help="Ones per image (exactk) or per row (rowk).")
@click.option("--n", type=int, default=4, help="Latin square / Sudoku size.")
@click.option("--layout", type=click.Choice(["contiguous", "offset", "random"]), default=None,
              help="Parity groups: consecutive pixels, the same shifted by one pixel, or a seeded permutation. "
                   "[default: contiguous, as sp.Parity and rule specs; it was random before 2026-12-01]")
@click.option("--rule-seed", type=SEED, default=0, help="Seed of the random parity layout.")
@click.option("--shape", default="6x6", help="Image shape HxW (parity, exactk, rowk; refused for latin and sudoku, "
                                            "whose --n sets the grid).")
@device_option()
@click.option("--threads", type=click.IntRange(1, 1024), default=None,
              help="CPU threads for torch (default: torch's choice). On CPU the weights are bitwise "
                   "reproducible for a given thread count; tiny models gain little from a second thread.")
@click.option("--ensemble", "ensemble_spec", metavar="SPEC", default=None,
              help="Train a grid of runs at once (stacked, vmapped DiTs), one directory per member under "
                   "RUN_DIR named from its values: 'G=2,3 n_train=64,128 seed=0,1' is the Cartesian "
                   "product (8 runs, e.g. RUN_DIR/G2-n_train64-seed0). Keys: rule, G, k, layout, rule_seed "
                   "(same image shape), seed, data_seed, n_train, n_heldout, p_mean, p_std, save_dtype, "
                   "save_model; every other option is shared.")
@click.option("--keep-state/--no-keep-state", default=True, show_default=True,
              help="Keep the last training state (model, EMA, optimizer, RNG) in RUN_DIR/final_state.pt, "
                   "so that a larger --total-steps can extend the finished run.")
@click.option("--tensorboard", "tensorboard", metavar="DIR", default=None,
              help="Also write the log as live TensorBoard events to DIR while training (`tensorboard --logdir "
                   "DIR`); needs tensorboardX: pip install 'scoreprobe[tensorboard]'.")
@click.option("--tensorboard-samples", "tensorboard_samples", metavar="N", type=int, default=0, show_default=True,
              help="With --tensorboard, also sample the EMA model N times at each checkpoint: its clocks with their "
                   "95%% intervals (margin charts), τ and a grid of samples, live (0: none).")
@_train_options
@click.pass_context
def train(ctx, run_dir, rule, G, k, n, layout, rule_seed, shape, device, threads, ensemble_spec, keep_state,
          tensorboard, tensorboard_samples, **settings):
    """Train a model and write log-spaced checkpoints to RUN_DIR (rerun the same command to resume);
    with --ensemble, a grid of DiT runs at once, one run directory each under RUN_DIR.

    \b
    Extending: the same command with a larger --total-steps continues a finished run (from
    final_state.pt). Its checkpoints stay as they are; new ones continue the log grid (each r times
    the one before, r the ratio between the first schedule's steps, up to the new total, which is the
    last). With a constant or step learning rate the extended run follows the trajectory of a run
    trained to the new total from the start; a cosine schedule cannot be extended.
    The log (RUN_DIR/train_log.jsonl, and the progress) has the loss and its mean in σ buckets;
    `scoreprobe plot-log RUN_DIR` draws it."""
    import torch
    from click.core import ParameterSource
    from scoreprobe.training.train import TrainConfig, train_run
    if rule in ("latin", "sudoku") and ctx.get_parameter_source("shape") != ParameterSource.DEFAULT:
        raise click.BadParameter(f"--shape applies to parity, exactk and rowk; a {rule} grid is --n N (an image of "
                                 "N one-hot channels of N x N pixels)", param_hint="--shape")
    if tensorboard_samples and tensorboard is None:
        raise click.BadParameter("needs --tensorboard DIR (where the sample grids go)",
                                 param_hint="--tensorboard-samples")
    if not 0 <= tensorboard_samples <= 10 ** 6:
        raise click.BadParameter(f"must be in [0, 1000000], got {tensorboard_samples}",
                                 param_hint="--tensorboard-samples")
    layout = _default_layout(rule, layout, ensemble_spec)
    rule_args = dict(rule=rule, G=G, k=k, n=n, layout=layout, rule_seed=rule_seed, shape=shape)
    if ensemble_spec is not None:
        grid = _ensemble_grid(ctx, ensemble_spec)       # usage errors before anything is built
        check_writable(run_dir, "RUN_DIR")
        if threads:
            torch.set_num_threads(threads)
        if tensorboard is not None:
            raise click.BadParameter("live events are written for one run; with --ensemble use `scoreprobe export-tb`",
                                     param_hint="--tensorboard")
        return _train_ensemble(run_dir, grid, rule_args, device, settings)
    cfg = TrainConfig(rule=_rule_spec(**rule_args), **settings)
    cfg.validate()   # every number in range and the model within the size limits before anything is said or made
    from scoreprobe.models.build import check_training_size, model_arch
    from scoreprobe.data.rules import rule_from_spec
    check_training_size(cfg.model, model_arch(cfg, rule_from_spec(cfg.rule)), cfg.batch_size)
    check_writable(run_dir, "RUN_DIR")
    if threads:
        torch.set_num_threads(threads)
    _say(f"training {cfg.model} on {cfg.rule} (N={cfg.n_train}) for {cfg.total_steps} steps on {device} "
               f"-> {run_dir}")
    path = train_run(cfg, run_dir, device=device, keep_state=keep_state, tensorboard=tensorboard,
                     tensorboard_samples=tensorboard_samples)
    _say(f"done: {path}")


def _default_layout(rule, layout, ensemble_spec):
    """--layout, or 'contiguous' with a SettingWarning when a parity run relies on the default (it was
    random before 2026-12-01: the same command then made another rule)."""
    if layout is not None:
        return layout
    in_grid = ensemble_spec is not None and "layout=" in ensemble_spec.lower()
    if not in_grid and (rule == "parity" or "rule=" in (ensemble_spec or "").lower()):
        from scoreprobe.errors import SettingWarning
        warnings.warn("--layout not given: parity groups are contiguous (the default since 2026-12-01; it was "
                      "random before, so this command makes another rule than it did then: pass --layout random "
                      "to continue or reproduce such a run)", SettingWarning, stacklevel=2)
    return "contiguous"


# ---------------------------------------------------------------------------------------------
# train --ensemble: a grid of runs trained at once
# ---------------------------------------------------------------------------------------------

_RULE_KEYS = ("rule", "G", "k", "layout", "rule_seed")   # rule options a member may set (same image shape)


def _grid_keys():
    """{lower-case key: option name} of what --ensemble may vary (config.ENSEMBLE_VARIES, the rule by its options)."""
    from scoreprobe.training.config import ENSEMBLE_VARIES
    return {name.lower(): name for name in (*_RULE_KEYS, *(f for f in ENSEMBLE_VARIES if f != "rule"))}


def _grid_values(ctx, key, text, names):
    """The values of one SPEC item `key=V1,V2,...`, each converted by the option's own type."""
    def bad(message):
        return click.BadParameter(message, ctx=ctx, param_hint="--ensemble")
    name = names.get(key.strip().lower().replace("-", "_"))
    if name is None:
        raise bad(f"{key!r} cannot vary within an ensemble (the members share the architecture and the "
                  f"training loop); keys: {', '.join(names.values())}")
    param = next(p for p in ctx.command.params if p.name == name)
    if ctx.get_parameter_source(name).name in ("COMMANDLINE", "ENVIRONMENT"):
        raise bad(f"{name} is set by both {param.opts[0]} and --ensemble; give it in one place")
    raw = [v.strip() for v in text.split(",")]
    if not all(raw) or len(set(raw)) != len(raw):
        raise bad(f"{name}={text!r}: expected distinct comma-separated values")
    try:
        return name, [param.type.convert(v, param, ctx) for v in raw]
    except click.BadParameter as e:
        raise bad(f"{name}={text}: {e.message}") from None


def _ensemble_grid(ctx, spec):
    """SPEC 'KEY=V1,V2 KEY2=...' -> the Cartesian product as a list of {option name: value} dicts."""
    import itertools
    names, axes = _grid_keys(), {}
    for item in spec.split():
        key, eq, text = item.partition("=")
        if not eq or not key or not text:
            raise click.BadParameter(f"expected KEY=V1,V2,... items separated by spaces, got {item!r}",
                                     ctx=ctx, param_hint="--ensemble")
        name, values = _grid_values(ctx, key, text, names)
        if name in axes:
            raise click.BadParameter(f"{name} is given twice", ctx=ctx, param_hint="--ensemble")
        axes[name] = values
    if not axes:
        raise click.BadParameter("empty; give at least one KEY=V1,V2,...", ctx=ctx, param_hint="--ensemble")
    import math
    from scoreprobe.limits import MAX_ENSEMBLE
    size = math.prod(len(v) for v in axes.values())
    if size > MAX_ENSEMBLE:
        raise click.BadParameter(f"{size} members, more than the limit {MAX_ENSEMBLE} (scoreprobe.limits.MAX_ENSEMBLE)",
                                 ctx=ctx, param_hint="--ensemble")
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def _refuse_ignored_keys(grid, cfgs):
    """A usage error when two members train the same run: a key the rule ignores (k with parity,
    rule_seed with a contiguous layout) would give identical duplicate members."""
    from scoreprobe.training.ensemble import member_key
    seen = {}
    for member, cfg in zip(grid, cfgs):
        key = member_key(cfg)
        if key in seen:
            other = seen[key]
            keys = [k for k in member if member[k] != other[k]]
            raise click.BadParameter(f"{', '.join(keys)} has no effect on the rule {cfg.rule}: members "
                                     f"{' '.join(f'{k}={other[k]}' for k in keys)} and "
                                     f"{' '.join(f'{k}={member[k]}' for k in keys)} would train identical runs",
                                     param_hint="--ensemble")
        seen[key] = member


def _train_ensemble(run_dir, grid, rule_args, device, settings):
    """Build and check one TrainConfig per grid member, then train them as one ensemble under run_dir."""
    import os
    from scoreprobe.training.ensemble import check_ensemble, train_ensemble
    from scoreprobe.training.train import TrainConfig
    cfgs, dirs = [], []
    for member in grid:
        rule_spec = _rule_spec(**{k: member.get(k, v) for k, v in rule_args.items()})
        own = {k: v for k, v in member.items() if k not in rule_args}
        cfgs.append(TrainConfig(rule=rule_spec, **{**settings, **own}))
        dirs.append(os.path.join(run_dir, "-".join(f"{k}{v}" for k, v in member.items())))
    _refuse_ignored_keys(grid, cfgs)
    check_ensemble(cfgs, dirs)          # ConfigError (one line, exit 2) before any directory is made
    _say(f"training an ensemble of {len(cfgs)} {cfgs[0].model} runs for {cfgs[0].total_steps} steps "
               f"on {device} -> {run_dir}")
    for i, (member, path) in enumerate(zip(grid, dirs)):
        _say(f"  {i + 1}/{len(grid)}: {' '.join(f'{k}={v}' for k, v in member.items())} -> {path}")
    train_ensemble(cfgs, dirs, device=device)
    _say(f"done: {len(dirs)} runs in {run_dir}")


# ---------------------------------------------------------------------------------------------
# plot-log
# ---------------------------------------------------------------------------------------------

@cli.command("plot-log")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None, callback=figure_path,
              help="Figure file [default: RUN_DIR/train_log.png; with several runs train_logs.png here].")
def plot_log(run_dirs, out):
    """Draw the training curve of RUN_DIR: the logged loss vs step on log axes, its mean in each σ
    bucket as separate lines, the held-out loss on a fixed bank (dashed) and the checkpoint steps
    marked. Several RUN_DIRs: their training and held-out losses overlaid, one colour per run; DiT and
    GPT runs (two different losses) in two panels side by side."""
    import os
    from scoreprobe.viz.trainlog import plot_train_log, plot_train_logs
    out = out or (os.path.join(run_dirs[0], "train_log.png") if len(run_dirs) == 1 else "train_logs.png")
    check_writable(out, "--out")
    # DataError (one line, exit 2): no log, a wrong record, too large; every log is read before drawing
    fig = plot_train_log(run_dirs[0]) if len(run_dirs) == 1 else plot_train_logs(run_dirs)
    save_figure(fig, out, dpi=120)
    panels = len(fig.axes)
    click.echo(f"wrote {out}" + (f" ({panels} panels: the runs log {panels} different losses (DiT: EDM-weighted DSM, "
                                 "GPT: next-token cross-entropy), never drawn on one axis)" if panels > 1 else ""))
