"""The training configuration of a run (`TrainConfig`) and the file formats the trainer writes.

A leaf module (no torch): the CLI builds `scoreprobe train`'s options from these fields at start-up.
"""
import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

from scoreprobe.atomic import atomic_write, atomic_write_text, fsync_dir  # noqa: F401  (the trainer's files)
from scoreprobe.errors import ConfigError
from scoreprobe.models.order import TOKEN_ORDERS
from scoreprobe.limits import (MAX_BATCH, MAX_DEPTH, MAX_HIDDEN, MAX_ITEMS, MAX_SIGMA, MAX_STEP, check_bool, check_int,
                               check_positive, check_real, check_seed)

RUN_FORMAT = "scoreprobe-run/1"
CKPT_FORMAT = "scoreprobe-ckpt/1"
FINAL_STATE = "final_state.pt"   # a finished run's last training state (resume.pt renamed by Run.finish)
RESUME_STATE = "resume.pt"       # an unfinished run's training state


def ckpt_path(run_dir, step):
    """RUN_DIR/ckpt/step_0001234.pt: where the trainer writes the checkpoint of `step`."""
    return Path(run_dir) / "ckpt" / f"step_{step:07d}.pt"


def checkpoint_steps(total_steps, n, first=1):
    """n unique integer steps, log-spaced from `first` to total_steps, with step 0 prepended. (n,) int list."""
    import numpy as np   # here: the CLI reads this module at start-up
    first = max(1, min(first, total_steps))
    n = max(2, min(n, total_steps - first + 2))
    if n == total_steps - first + 2:
        return [0] + list(range(first, total_steps + 1))
    m = n - 1
    while True:  # more geometric points until rounding leaves n - 1 distinct steps
        pts = np.geomspace(first, total_steps, m) if m > 1 else np.array([total_steps])
        steps = np.unique(np.round(pts).astype(np.int64))
        if len(steps) >= n - 1:
            break
        m += 1
    keep = np.unique(np.round(np.linspace(0, len(steps) - 1, n - 1)).astype(int))
    return [0] + [int(s) for s in steps[keep]]


def run_checkpoint_steps(total_steps, n, first=1, extra=()):
    """The checkpoint steps of a run: `checkpoint_steps(total_steps, n, first)` with the `extra` steps
    (TrainConfig.extra_checkpoints, each in [1, total_steps]) added, sorted, each once. (k,) int list."""
    grid = checkpoint_steps(total_steps, n, first)
    return sorted(set(grid) | {int(s) for s in extra}) if extra else grid


LR_SCHEDULES = ("constant", "cosine", "step")
# rules whose valid set is closed under transposition, so `transpose` keeps the data valid
# (scoreprobe.data.grids.LatinSquare.transposed)
TRANSPOSABLE_RULES = ("latin", "sudoku")
MAX_EXTRA_CHECKPOINTS = 1000
# the TrainConfig fields in which the members of an ensemble (scoreprobe.training.ensemble) may differ; the
# others fix the architecture and the shape of the training loop, which the members share
ENSEMBLE_VARIES = ("rule", "n_train", "n_heldout", "data_seed", "seed", "p_mean", "p_std", "save_dtype",
                   "save_model")

_INT_RANGES = {"n_train": (1, MAX_ITEMS), "n_heldout": (0, MAX_ITEMS), "batch_size": (1, MAX_BATCH),
               "total_steps": (1, MAX_STEP), "n_checkpoints": (1, 10**4),
               "patch_size": (1, 128), "lr_drop_step": (0, MAX_STEP), "warmup_steps": (0, MAX_STEP),
               "log_every": (1, MAX_STEP), "resume_every": (1, MAX_STEP)}

_REAL_RANGES = {"p_mean": (-30.0, 30.0), "p_std": (0.0, 10.0), "lr_min": (0.0, 10.0), "weight_decay": (0.0, 1e3),
                "ema_decay": (0.0, 1.0)}


# a GPT of about the grid DiT's parameters (hidden_size 80, depth 4, patch 2, 6x6: 507 124): 489 500 (-3.5%),
# scoreprobe.models.build.param_count; its width, depth and heads as TrainConfig spells them for model="gpt".
# It trains stably at the grid's lr 2e-3 (parity G = 2, N = 120, batch 96: no NaN, loss falling; in patch order it
# sits near ln 2 for ~100 steps longer than at 1e-3 and is behind it at step 400, in raster order ahead; issue 25).
MATCHED_GPT = dict(model="gpt", size="tiny", hidden_size=100, depth=4, num_heads=4)


@dataclass
class TrainConfig:
    """The settings of one training run (stored in run.json as `config`; fields added later take their
    defaults when an older run.json lacks them).

    For model="gpt", hidden_size / depth / num_heads set the GPT's n_embd / n_layer / n_head (over the
    models.gpt.GPT_SIZES preset `size`), and `token_order` the order in which it reads the pixels:
    "raster" (row by row; every run before the field existed), "patch" (the image cut into the DiT's
    patch_size x patch_size patches, the patches in raster order, raster order inside each patch) or
    "random" (one fixed permutation, models.order.RANDOM_ORDER_SEED: a control without locality). The
    order is stored in the architecture (run.json `arch`, every checkpoint) and restored on loading;
    samples and likelihoods always take and give images in (C, H, W) order. DiTs read patches and take
    only "raster" (the default).
    """
    rule: dict = field(default_factory=lambda: {"name": "parity", "G": 2, "shape": [6, 6],
                                                "layout": "contiguous", "seed": 0})  # random before 2026-12-01
    n_train: int = 256           # training set size N
    n_heldout: int = 1024        # held-out valid images (never trained on)
    data_seed: int = 0           # draws the train / held-out split
    transpose: bool = False      # every training and held-out grid transposed (latin, sudoku): image rows hold the drawn grids' columns
    seed: int = 0                # weights init, minibatches, σ and noise draws
    model: str = "dit"           # "dit" or "gpt"
    size: str = "tiny"           # size preset (models.dit.DIT_SIZES / models.gpt.GPT_SIZES)
    patch_size: int = 2          # DiT patch size p (tokens = H*W / p²)
    patch_shape: str = ""        # DiT patch HxW instead, e.g. 1x4 (a token per row of a 4x4 grid); "" = patch_size x patch_size
    hidden_size: int = None      # override the preset's width
    depth: int = None            # override the preset's depth
    num_heads: int = None        # override the preset's heads
    token_order: str = "raster"  # GPT pixel order: raster, patch (patch_size patches, raster within), random (fixed)
    global_token: bool = False   # DiT: a learned register token whose state every block broadcasts to all tokens
    multiplicative: bool = False  # DiT: GLU MLPs (products of two projections) at the plain MLP's parameter count
    curriculum: str = ""         # G0:G:STEPS: parity on G0-pixel pieces until STEPS (G0:G:STEPS:mixed: at every step); "" off
    sigma_data: float = 1.0      # EDM σ_data (±1 bits have unit variance)
    time_scale: float = 250.0    # c_noise = time_scale · ln σ / 4 feeds the timestep embedder
    p_mean: float = -1.2         # training ln σ ~ N(p_mean, p_std)
    p_std: float = 1.2           # (see p_mean)
    lr: float = 1e-3             # AdamW learning rate (peak, after warm-up)
    lr_schedule: str = "constant"  # constant; cosine: decay from lr to lr_min at total_steps; step: see lr_drop_step
    lr_min: float = 0.0          # final learning rate of the cosine and step schedules
    lr_drop_step: int = 0        # step schedule: lr until this step, lr_min from it on
    weight_decay: float = 0.0    # AdamW weight decay
    warmup_steps: int = 0        # linear lr warm-up
    batch_size: int = 128        # minibatch, drawn with replacement from the N items
    total_steps: int = 20000     # optimizer steps; the last checkpoint is here. Larger than a finished run's: extends it (the checkpoint grid continued)
    ema_decay: float = 0.999     # with warm-up min(decay, (1+t)/(10+t))
    n_checkpoints: int = 24      # log-spaced, step 0 included
    first_checkpoint: int = None  # first step of the log-spaced range (after 0); None: auto_first_checkpoint
    extra_checkpoints: list = field(default_factory=list)  # steps beside the log grid, increasing (e.g. 50,100,200,350)
    save_dtype: str = "float32"  # dtype of weights in step files ("float16" halves shipped size)
    save_model: bool = False     # also keep raw (non-EMA) weights in step files
    log_every: int = 100         # steps between lines of train_log.jsonl
    resume_every: int = 500      # write resume.pt this often (and at every checkpoint)

    def __post_init__(self):
        if isinstance(self.extra_checkpoints, tuple):   # stored and compared as a JSON list
            self.extra_checkpoints = list(self.extra_checkpoints)

    def to_dict(self):
        return dataclasses.asdict(self)

    def checkpoint_schedule(self):
        """Every checkpoint step of the run (first total_steps; an extension adds its own): the log grid
        from first_step() with step 0, and extra_checkpoints. (k,) int list."""
        return run_checkpoint_steps(self.total_steps, self.n_checkpoints, self.first_step(), self.extra_checkpoints)

    def first_step(self):
        """The first nonzero checkpoint step: `first_checkpoint`, or when None `auto_first_checkpoint`."""
        if self.first_checkpoint is not None:
            return self.first_checkpoint
        return auto_first_checkpoint(self.total_steps, self.batch_size)

    @classmethod
    def from_dict(cls, d):
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ConfigError(f"unknown training settings: {sorted(unknown)}")
        return cls(**d)

    def patch(self):
        """The DiT's patch: `patch_size` (an int, p x p), or [PH, PW] from `patch_shape`. ConfigError when
        patch_shape is not HxW with both sides in [1, 128]."""
        if not self.patch_shape:
            return self.patch_size
        m = re.fullmatch(r"([0-9]+)[xX]([0-9]+)", str(self.patch_shape), flags=re.ASCII)
        if m is None:   # ASCII digits only: int() takes '２' and ' 1', which run.json would keep verbatim
            raise ConfigError(f"patch_shape must be HxW in ASCII digits such as 1x4, got {str(self.patch_shape)[:40]!r}")
        ph, pw = int(m[1]), int(m[2])
        return [check_int(ph, "patch_shape height", 1, 128), check_int(pw, "patch_shape width", 1, 128)]

    def curriculum_plan(self):
        """(G_start, switch_step) of `curriculum`, or None when it is off. ConfigError unless the rule is
        parity with G = G_END, 1 < G_START < G_END and 0 < STEPS < total_steps (and a fourth part, when
        there is one, is "mixed": see `curriculum_mix`)."""
        if not self.curriculum:
            return None
        parts = str(self.curriculum).split(":")
        try:
            if len(parts) not in (3, 4) or parts[3:] not in ([], ["mixed"]):
                raise ValueError
            g0, g1, steps = (int(v) for v in parts[:3])
        except ValueError:
            raise ConfigError(f"curriculum must be G_START:G_END:STEPS such as 2:4:5000 (or G_START:G_END:STEPS:mixed), "
                              f"got {self.curriculum!r}") from None
        rule = self.rule if isinstance(self.rule, dict) else {}
        if rule.get("name") != "parity" or rule.get("G") != g1:
            raise ConfigError(f"curriculum {self.curriculum} needs the parity rule with G={g1}, got {rule}")
        if not 1 < g0 < g1:
            raise ConfigError(f"curriculum: G_START={g0} must be > 1 and smaller than G_END={g1} "
                              "(each group of G_END is cut into pieces of G_START, the last one shorter)")
        if not 0 < steps < self.total_steps:
            raise ConfigError(f"curriculum: STEPS={steps} must be in (0, total_steps={self.total_steps})")
        return g0, steps

    def curriculum_mix(self):
        """The curriculum's control without its order: with `curriculum` G_START:G_END:STEPS:mixed, every
        minibatch item of every step is drawn from the curriculum's images with probability
        STEPS / total_steps and from the run's own training set otherwise (the same images, and in
        expectation the same number of draws of each, as the curriculum; no first phase). Returns that
        probability, or 0.0 for an ordered curriculum or none."""
        plan = self.curriculum_plan()
        if plan is None or not str(self.curriculum).endswith(":mixed"):
            return 0.0
        return plan[1] / self.total_steps

    def _check_numbers(self):
        """Type and range of every numeric field (limits in scoreprobe.limits), before anything is built."""
        for name, (lo, hi) in _INT_RANGES.items():
            check_int(getattr(self, name), name, lo, hi)
        if self.first_checkpoint is not None:
            check_int(self.first_checkpoint, "first_checkpoint", 1, MAX_STEP)
        self._check_extra_checkpoints()
        for name in ("seed", "data_seed"):
            check_seed(getattr(self, name), name)
        for name in ("hidden_size", "depth", "num_heads"):
            if getattr(self, name) is not None:
                check_int(getattr(self, name), name, 1, MAX_HIDDEN if name != "depth" else MAX_DEPTH)
        for name, hi in (("sigma_data", MAX_SIGMA), ("time_scale", 1e6), ("lr", 10.0)):
            check_positive(getattr(self, name), name, hi)
        for name, (lo, hi) in _REAL_RANGES.items():   # ln σ ~ N(p_mean, p_std) must stay far from overflow
            check_real(getattr(self, name), name, lo, hi)

    def _check_extra_checkpoints(self):
        extra = self.extra_checkpoints
        if not isinstance(extra, list) or len(extra) > MAX_EXTRA_CHECKPOINTS:
            raise ConfigError(f"extra_checkpoints must be a list of at most {MAX_EXTRA_CHECKPOINTS} steps, got "
                              f"{type(extra).__name__}" + (f" of {len(extra)}" if isinstance(extra, list) else ""))
        for s in extra:
            check_int(s, "a step of extra_checkpoints (1 to total_steps)", 1, self.total_steps)
        if any(b <= a for a, b in zip(extra, extra[1:])):
            raise ConfigError(f"extra_checkpoints must increase, got {str(extra)[:80]}")

    def validate(self):
        if self.model not in ("dit", "gpt"):
            raise ConfigError(f"model must be 'dit' or 'gpt', got {self.model!r}")
        if self.model != "dit" and (self.global_token or self.multiplicative):
            raise ConfigError("global_token and multiplicative are DiT switches; use model='dit'")
        if self.token_order not in TOKEN_ORDERS:
            raise ConfigError(f"token_order must be one of {', '.join(TOKEN_ORDERS)}, got {str(self.token_order)[:40]!r}")
        if self.model != "gpt" and self.token_order != "raster":
            raise ConfigError(f"token_order {self.token_order!r} is a GPT setting; use model='gpt'")
        if self.patch_shape:
            self.patch()   # HxW, both sides in range
            if self.model != "dit":
                raise ConfigError("patch_shape is a DiT setting; use model='dit' (a GPT's patch order reads patch_size)")
        rule_name = self.rule.get("name") if isinstance(self.rule, dict) else None
        if check_bool(self.transpose, "transpose") and rule_name not in TRANSPOSABLE_RULES:
            raise ConfigError(f"transpose applies to the rules {', '.join(TRANSPOSABLE_RULES)}, whose grids stay valid "
                              f"when transposed, not to {str(rule_name)[:40]!r}")
        self._check_numbers()
        self.curriculum_plan()
        if self.save_dtype not in ("float32", "float16", "bfloat16"):
            raise ConfigError(f"save_dtype must be float32, float16 or bfloat16, got {self.save_dtype!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ConfigError(f"lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        if not (0 <= self.lr_min <= self.lr):
            raise ConfigError(f"lr_min must be in [0, lr={self.lr}], got {self.lr_min}")
        if self.lr_schedule == "step" and not (0 < self.lr_drop_step < self.total_steps):
            raise ConfigError(f"the step schedule needs 0 < lr_drop_step < total_steps={self.total_steps}, "
                              f"got {self.lr_drop_step}")
        if not (0 <= self.ema_decay < 1):
            raise ConfigError(f"ema_decay must be in [0, 1), got {self.ema_decay}")


# The default first checkpoint (docs/definitions.md, "Training runs"): the log grid spans at most this factor
# below the total (the shipped series: 500 of 36 000) and starts once this many training images have been
# drawn (500 steps at batch 96, the shipped series' first checkpoint, where its rule accuracy leaves 0:
# 0.035 at 500, 0.24 at 738, checkpoints/parity-default/clocks.json).
FIRST_CHECKPOINT_SPAN = 72
FIRST_CHECKPOINT_IMAGES = 48_000


def auto_first_checkpoint(total_steps, batch_size):
    """min(total_steps / 72, 48 000 images / batch_size), rounded, at least 1: the first nonzero
    checkpoint of a run that does not name one. A short run's log grid spans 1.86 decades below its
    total (so its checkpoints are not spent on steps 1, 4, 14 where no clock moves); a long run's starts
    where the shipped series' clocks begin to move, whatever its length."""
    return max(1, min(round(total_steps / FIRST_CHECKPOINT_SPAN), round(FIRST_CHECKPOINT_IMAGES / batch_size)))


def stored_config(stored):
    """A run.json `config` dict with the fields added since it was written set to their defaults, so it
    compares equal to the TrainConfig that wrote it (`TrainConfig.to_dict()`)."""
    return {**TrainConfig().to_dict(), **stored}
