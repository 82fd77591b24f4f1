"""A grid of training runs: one base TrainConfig varied over named axes.

    base = TrainConfig(rule={"name": "parity", "G": 2, "shape": [6, 6], "layout": "offset", "seed": 0},
                       hidden_size=80, batch_size=96, n_checkpoints=20)
    grid = Grid(base, {"N": [30, 60, 120], "width": [48, 80], "seed": [0, 1, 2]}, name="my-study",
                steps=views(12000, min_steps=3000))
    len(grid)            # 18 cells
    grid.sizes           # {"N": 3, "width": 2, "seed": 3}
    grid.runs[0].name    # "N30-width48-seed0"

Axes. An axis name is one of the shorthands of AXES ("N" -> n_train, "width" -> hidden_size, "G" -> the
rule's G, "rule" -> the whole rule spec dict, ...) or any TrainConfig field by its own name ("batch_size",
"p_mean", ...). Each axis holds a non-empty list of distinct values. Every cell's TrainConfig is built and
validated when the Grid is made: an unknown axis, a bad value or a config TrainConfig refuses raises one
ConfigError naming the axis and value, before any work.

Order. `grid.runs` (and iteration) is the row-major product of the axes in the order given: the last axis
varies fastest (itertools.product), so with the axes above the three seeds of one (N, width) come together.

Names. A cell's run name joins "<axis><label>" over the axes with "-" (label: the value as text; a rule spec:
its name and G / k / n, "parity2"; a float: its shortest repr, "lr0.002"): "N30-width48-seed0". It is the run
directory's and the export's name (`<out>/runs/<name>`, `<out>/exports/<name>.npz`), so a cell keeps its
files when axes gain values.

Budgets. `steps`: None (base.total_steps for every cell) or a callable cfg -> total_steps, called with each
cell's TrainConfig; `views(k, min_steps)` is k passes over each training image (total_steps =
max(min_steps, ceil(k · N / batch_size))), the budget that scales with N.
"""
import dataclasses
import itertools
import json
import math
import re
from pathlib import Path

from scoreprobe.errors import ConfigError
from scoreprobe.limits import MAX_GRID_CELLS, MAX_STEP, check_whole
from scoreprobe.studies.recipes import Run
from scoreprobe.training.config import TrainConfig

# shorthand -> TrainConfig field ("rule.G": the G of the rule spec)
AXES = {"N": "n_train", "seed": "seed", "data_seed": "data_seed", "width": "hidden_size", "depth": "depth",
        "heads": "num_heads", "G": "rule.G", "lr": "lr", "rule": "rule"}
FIELDS = tuple(f.name for f in dataclasses.fields(TrainConfig))
RUNS_FOLDER = "runs"        # run directories: <out>/runs/<name>
EXPORTS_FOLDER = "exports"  # exports: <out>/exports/<name>.npz


def field_of(axis):
    """The TrainConfig field an axis sets ("rule.G" for G); ConfigError for an unknown axis."""
    if axis in AXES:
        return AXES[axis]
    if axis in FIELDS:
        return axis
    raise ConfigError(f"unknown grid axis {axis!r}: use a shorthand ({', '.join(AXES)}) or a TrainConfig field "
                      f"({', '.join(FIELDS)})")


def _steps_of_views(k, min_steps, cfg):
    return max(int(min_steps), math.ceil(k * cfg.n_train / cfg.batch_size))


def views(k, min_steps=0):
    """A `steps=` callable: k passes over each training image, at least min_steps (picklable)."""
    import functools
    return functools.partial(_steps_of_views, k, min_steps)


def label(value):
    """A value as it appears in a run name: ints and strings as they are, floats by their shortest repr,
    a rule spec as name + G / k / n ("parity2"); characters other than [A-Za-z0-9._-] become "_"."""
    if isinstance(value, dict):
        text = str(value.get("name", "rule")) + "".join(str(value[k]) for k in ("G", "k", "n") if k in value)
    elif isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, float):
        text = repr(value)
    else:
        text = str(value)
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


def _apply(cfg, axis, value):
    """cfg with `axis` set to `value` (a new TrainConfig; the rule dict copied)."""
    field = field_of(axis)
    if field == "rule.G":
        rule = cfg.rule if isinstance(cfg.rule, dict) else {}
        if "G" not in rule:
            raise ConfigError(f"grid axis 'G' sets the rule's G, but the rule {rule} has none (use a parity rule, "
                              "or the 'rule' axis with whole rule specs)")
        return dataclasses.replace(cfg, rule={**rule, "G": value})
    if field == "rule":
        if not isinstance(value, dict) or "name" not in value:
            raise ConfigError(f"grid axis 'rule' takes rule spec dicts such as {{'name': 'parity', 'G': 2, ...}}, "
                              f"got {value!r}")
        return dataclasses.replace(cfg, rule=dict(value))
    return dataclasses.replace(cfg, **{field: value})


@dataclasses.dataclass
class Grid:
    """A grid of TrainConfigs: `base` with each combination of the `axes` values (see the module).

    base : TrainConfig. axes : {axis: [values]} (insertion order is the iteration order, last fastest).
    out : the grid's folder (default "runs/<name>"): run directories in <out>/runs, exports in <out>/exports.
    name : the grid's name (folder default, logs). steps : None or cfg -> total_steps (e.g. `views(k)`).
    """
    base: TrainConfig
    axes: dict
    out: object = None
    name: str = "grid"
    steps: object = None
    runs: list = dataclasses.field(init=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.base, TrainConfig):
            raise ConfigError(f"Grid needs a TrainConfig as base, got {type(self.base).__name__}")
        if not isinstance(self.axes, dict) or not self.axes:
            raise ConfigError(f"Grid needs axes as a non-empty dict {{axis: [values]}}, got {self.axes!r}")
        if not re.fullmatch(r"[A-Za-z0-9._-]+", str(self.name)):
            raise ConfigError(f"a grid name is letters, digits, '.', '_' and '-', got {self.name!r}")
        self.axes = {a: self._values(a, v) for a, v in self.axes.items()}
        cells = math.prod(len(v) for v in self.axes.values())
        if cells > MAX_GRID_CELLS:
            raise ConfigError(f"grid {self.name} has {cells} cells ({' x '.join(str(len(v)) for v in self.axes.values())}"
                              f"), more than the limit {MAX_GRID_CELLS} (scoreprobe.limits.MAX_GRID_CELLS)")
        self.out = Path(self.out if self.out is not None else Path("runs") / self.name)
        self.runs = [self._cell(combo) for combo in itertools.product(*self.axes.values())]

    def _values(self, axis, values):
        field_of(axis)
        if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
            raise ConfigError(f"grid axis {axis!r} needs a list of values, got {values!r}")
        values = list(itertools.islice(values, MAX_GRID_CELLS + 1))   # a huge or endless iterable: not all of it
        if len(values) > MAX_GRID_CELLS:
            raise ConfigError(f"grid axis {axis!r} has more than {MAX_GRID_CELLS} values (scoreprobe.limits."
                              "MAX_GRID_CELLS, the cells of a grid)")
        labels = [label(v) for v in values]
        if not values or len(set(labels)) != len(labels):
            raise ConfigError(f"grid axis {axis!r} needs a non-empty list of distinct values, got {values!r}")
        return values

    def _cell(self, combo):
        """The Run of one combination of axis values (validated: ConfigError names the cell)."""
        cfg, name = self.base, "-".join(f"{a}{label(v)}" for a, v in zip(self.axes, combo))
        try:
            for axis, value in zip(self.axes, combo):
                cfg = _apply(cfg, axis, value)
            if self.steps is not None:
                cfg = dataclasses.replace(cfg, total_steps=check_whole(_call_steps(self.steps, cfg),
                                                                       "steps(cfg) (total_steps)", 1, MAX_STEP))
            cfg.validate()
            _check_rule(cfg)
        except (ConfigError, TypeError, ValueError) as e:
            raise ConfigError(f"grid {self.name}, cell {name}: {e}") from None
        values = dict(zip(self.axes, combo))
        meta = {**_model_meta(cfg), "grid": self.name, "axes": json.loads(json.dumps(values, default=str))}
        group = "-".join(f"{a}{label(v)}" for a, v in values.items() if a != "seed") or self.name
        return Run(name, RUNS_FOLDER, group, cfg.seed, cfg, meta, axes=tuple(combo))

    def __len__(self):
        return len(self.runs)

    def __iter__(self):
        return iter(self.runs)

    @property
    def sizes(self):
        """{axis: number of values}, in axis order."""
        return {a: len(v) for a, v in self.axes.items()}

    @property
    def exports(self):
        return self.out / EXPORTS_FOLDER

    def run_dir(self, run):
        return self.out / RUNS_FOLDER / run.name

    def coords(self):
        """{axis: coordinate values}: the values themselves; rule specs (and lists) by their label."""
        return {a: [label(v) if isinstance(v, (dict, list, tuple)) else v for v in vs] for a, vs in self.axes.items()}


def _call_steps(steps, cfg):
    """steps(cfg), any error of the user's callable a ConfigError (the cell is named by the caller)."""
    try:
        return steps(cfg)
    except Exception as e:   # noqa: BLE001  (views(inf) overflows in math.ceil: any callable may raise anything)
        raise ConfigError(f"steps(cfg) raised {type(e).__name__}: {e}") from None


def _check_rule(cfg):
    """The rule spec builds (ConfigError otherwise); cheap for every rule the studies use."""
    from scoreprobe.data.rules import rule_from_spec
    if not isinstance(cfg.rule, dict):
        raise ConfigError(f"rule must be a spec dict, got {cfg.rule!r}")
    rule_from_spec(cfg.rule)


def _model_meta(cfg):
    """What recipes.run_seconds reads of a run: rule name, model, width, depth (the size preset's when unset)."""
    from scoreprobe.models.dit import DIT_SIZES
    from scoreprobe.models.gpt import GPT_SIZES
    if cfg.model == "gpt":
        preset = GPT_SIZES.get(cfg.size, GPT_SIZES["tiny"])
        width, depth = cfg.hidden_size or preset["n_embd"], cfg.depth or preset["n_layer"]
    else:
        preset = DIT_SIZES.get(cfg.size, DIT_SIZES["tiny"])
        width, depth = cfg.hidden_size or preset["hidden_size"], cfg.depth or preset["depth"]
    return {"rule": cfg.rule.get("name"), "model": cfg.model, "width": width, "depth": depth}
