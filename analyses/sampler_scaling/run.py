"""Does τ_mem's exponent in N depend on the sampler? (issue 36, "Also"): the scaling study's G = 2 N-axis runs
(N = 30, 60, 120, 240, 3 training seeds) re-measured with EDM's stochastic sampler (S_churn 40, S_noise 1: the
setting that moved the shipped series' memorization most, analyses/results/sampler_clocks.md).

The scaling runs' checkpoints are not shipped (20 MB per run); what is shipped is each run's TrainConfig and
its per-sample clock states (analyses/results/scaling_cpu/<run>.npz). Training on one CPU thread repeats
itself on one machine and torch build, not necessarily across them (3 of the 12 CPU runs regenerated here
reproduced their shipped states, 9 did not), so a run is regenerated from its TrainConfig and, before it is
measured with the other sampler, its last
checkpoint is re-measured with the default Heun PF-ODE and its 1000 sample states compared with the shipped
export's: identical states name the same model (the check is recorded per run; a run whose states differ is
measured with both samplers, so its comparison is still paired on the same checkpoints, and it is marked).

  <results>/sampler_scaling_<preset>/<run>.npz   per run: the stochastic sampler's clocks (scaling's format),
                                                 meta: the identity check; heun/<run>.npz only when it failed
  <results>/sampler_scaling_<preset>.md/.json    τ_mem and τ_rule per N under both samplers, b per sampler over
                                                 thresholds, and b_stochastic − b_heun from the paired ratios

Usage:
  python analyses/sampler_scaling --jobs 2         # 12 runs: ≈ 2.7 h on 2 idle cores (training ≈ 2 h of it)
  python analyses/sampler_scaling --smoke          # the scaling smoke runs at G = 2: ≈ 1 min
  python analyses/sampler_scaling --from-results   # the tables from the exports, seconds
  python analyses/sampler_scaling --plan           # the runs, order and estimated time
"""
import functools
import logging

from scoreprobe.cli import study as study_cli
from scoreprobe.cli.study import drive
from scoreprobe.studies import presets
from scoreprobe.studies.export import load_exports
from scoreprobe.studies.queue import run_queue
from analyses.sampler_scaling.remeasure import remeasure
from analyses.sampler_scaling.grid import LABEL, PRESETS, SAMPLER, plan, run_seconds

logger = logging.getLogger("sampler_scaling")


def parse_args(argv=None):
    p = study_cli.parser(__doc__, PRESETS)
    args = study_cli.parse(p, argv, PRESETS)
    if args.train_only:   # its runs are the scaling study's: train them there
        p.error("--train-only: this study measures the scaling runs; train them with analyses/scaling --train-only")
    args.scaling_exports = args.results / f"scaling_{args.preset}"
    args.exports = args.results / f"sampler_scaling_{args.preset}"
    return args


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    runs = plan(args.preset)
    from analyses.sampler_scaling.tables import write_all

    def train(on_done):
        done = set(load_exports(runs, args.exports)[0])
        run_one = functools.partial(remeasure, sampler=SAMPLER, label=LABEL, shipped=args.scaling_exports,
                                    exports=args.exports)   # regenerate, check it is the shipped run, measure, export
        run_queue(run_one, args, [r for r in runs if r.name not in done], on_done,
                  lambda r: run_seconds(r, args.n_samples), args.hours, args.jobs, "sampler_scaling",
                  args.scheduler)
    plan_lines = lambda: presets.plan_lines(   # noqa: E731
        runs, args, lambda r: args.exports, lambda r: f"N = {r.meta['N']:4d} training seed {r.seed} data seed "
        f"{r.cfg.data_seed}", seconds=lambda r: run_seconds(r, args.n_samples))
    drive(args, plan_lines, train, lambda: write_all(args, runs), logger)


if __name__ == "__main__":
    main()
