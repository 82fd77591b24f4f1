"""The report page and plot-log part of the abuse corpus (issue 33, sections 1 and 5), in a copy `d` of
the good run directory of tests/abuse_corpus.py.

Two kinds of attempt:
- a refusal (abuse_inputs.Attempt: API call, CLI argv, typed error, reason): clean when both refuse
  within 2 s with one line (abuse_attempt.run_attempt) *and* nothing was computed first: a report
  store written or changed under d.parent / "r.cache" during the attempt is a "late refusal";
- a page or figure that must be made (`Made`): clean when the API and the CLI make it, warnings
  match `warn`, and the page holds no markup that came from the data (`injected_markup`): else
  "injection ran" (the page) or "traceback" (anything raised).

`run_report_attempt` classifies one; `cases()` lists (name, surface, build); `python
tests/abuse_corpus.py` prints the counts per surface.
"""
import atexit
import contextlib
import hashlib
import io
import json
import os
import shutil
import tempfile
import warnings
from collections import namedtuple
from pathlib import Path

import abuse_attempt
from abuse_inputs import Attempt
from page_markup import injected_markup

SURFACES = {"report": "report page: stores, run.json, sizes, cache", "plot-log": "plot-log: train_log.jsonl, run.json"}
Made = namedtuple("Made", "api argv out warn", defaults=(None,))   # out: the file both must write
TINY = {"n_samples": 4, "n_steps": 2, "res": 4, "field_res": 4}
TINY_ARGS = ["--size", "n_samples=4 n_steps=2 res=4 field_res=4"]
VECTORS = ['<img src=x onerror="document.title=\'pwned\'">', '</script><script>document.title="pwned"</script>',
           "<!--<script>", "a\u2028b\u2029c", '" onmouseover="document.title=1" x="',
           '<meta http-equiv="refresh" content="0;url=data:text/html,pwned">', '<base href="http://exfil.invalid/">',
           "<iframe srcdoc=\"<script>parent.document.title='pwned'</script>\"></iframe>", "$\\frac{1}{$"]
_TEMPLATES = {}


# ---------------------------------------------------------------------------------------------
# Stores of the good run, computed once per process and copied into each case
# ---------------------------------------------------------------------------------------------

def _stores(d):
    """d.parent / "stores" with a clocks and a basins store of the run `d` (a run named like d with the
    same run.json: the stores of one computed once, in a temporary folder)."""
    import scoreprobe as sp
    key = (d.name, hashlib.sha1((d / "run.json").read_bytes()).hexdigest())
    if key not in _TEMPLATES:
        tmp = Path(tempfile.mkdtemp(prefix="abuse-report-"))
        atexit.register(shutil.rmtree, tmp, True)
        shutil.copytree(d, tmp / d.name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sp.report(tmp / d.name, tmp / "r.html", sections=("clocks", "basins"), steps="all", sizes=TINY,
                      cache=tmp / "r.cache", progress=False)
        _TEMPLATES[key] = tmp / "r.cache"
    dst = d.parent / "stores"
    if not dst.exists():
        shutil.copytree(_TEMPLATES[key], dst)
    return dst


def _edit(store, attrs=None, record=None, config=None, drop=()):
    """Change root attributes of `store` (the chunk checksums stay valid): attrs {name: value},
    record {key: value} of the commit record, config {key: value} of scoreprobe_config."""
    meta = json.loads((store / "zarr.json").read_text())
    a = meta["attributes"]
    a.update(attrs or {})
    for k in drop:
        a.pop(k, None)
    if record is not None:
        a["scoreprobe_record"] = record if not isinstance(record, dict) else {**a["scoreprobe_record"], **record}
    if config is not None:
        a["scoreprobe_config"] = json.dumps({**json.loads(a["scoreprobe_config"]), **config})
    (store / "zarr.json").write_text(json.dumps(meta))
    return store


def _report_api(d, **kw):
    def call():
        import scoreprobe as sp
        return sp.report(d, d.parent / "r.html", steps="all", progress=False,
                         **{"sizes": TINY, "cache": d.parent / "r.cache", **kw})
    return call


def _report_argv(d, *extra):
    return ["report", d, "--out", d.parent / "r.html", "--cache", d.parent / "r.cache", "--steps", "all", *TINY_ARGS,
            *extra]


def _bad_store(section="clocks", error="StoreError", **edit):
    """A refusal: the given `section` store edited by `edit`; the other sections would be computed
    into d.parent / "r.cache" if the refusal came late."""
    def build(d):
        import scoreprobe.errors as errors
        store = _edit(_stores(d) / f"{section}.zarr", **edit)
        return Attempt(_report_api(d, stores=[store], sections=("clocks", "basins")),
                       _report_argv(d, "--store", store, "--sections", "clocks,basins"), getattr(errors, error))
    return build


def _bad_size(error="ConfigError", **sizes):
    def build(d):
        import scoreprobe.errors as errors
        text = " ".join(f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in sizes.items())
        return Attempt(_report_api(d, sizes={**TINY, **sizes}), _report_argv(d, "--size", text),
                       getattr(errors, error))
    return build


def _page(section="clocks", run=None, **edit):
    """A page that must be made from a store edited by `edit` (strings where strings belong)."""
    def build(d):
        src = d if run is None else run(d)
        if run is None:
            store = _edit(_stores(d) / f"{section}.zarr", **edit)
            kw, extra = {"stores": [store], "sections": (section,)}, ["--store", store, "--sections", section]
        else:
            kw, extra = {"sections": ("clocks",)}, ["--sections", "clocks"]
        out = d.parent / "r.html"
        api = _report_api(src, **kw)
        return Made(api, ["report", src, "--out", out, "--steps", "all", *TINY_ARGS, *extra], out)
    return build


def _run_json(**config):
    def run(d):
        meta = json.loads((d / "run.json").read_text())
        meta["config"].update(config)
        (d / "run.json").write_text(json.dumps(meta))
        return d
    return run


def _renamed(name):
    def run(d):
        new = d.parent / name
        shutil.copytree(d, new)
        return new
    return run


def _cache_is_file(d):
    import scoreprobe.errors as errors
    (d.parent / "r.cache").write_text("not a folder")
    return Attempt(_report_api(d, sections=("clocks",)), _report_argv(d, "--sections", "clocks"), errors.ConfigError)


def _bad_cache(**edit):
    """The report's own cache edited (a clocks store in r.cache with a wrong attribute)."""
    def build(d):
        import scoreprobe.errors as errors
        cache = d.parent / "r.cache"
        shutil.copytree(_stores(d), cache)
        _edit(cache / "clocks.zarr", **edit)
        shutil.rmtree(cache / "basins.zarr")    # computed again if the refusal came late
        return Attempt(_report_api(d, sections=("clocks", "basins")), _report_argv(d, "--sections", "clocks,basins"),
                       errors.StoreError)
    return build


# ---------------------------------------------------------------------------------------------
# plot-log
# ---------------------------------------------------------------------------------------------

def _log(lines, error="DataError", warn=None, run=None):
    """train_log.jsonl of d with `lines` (str or bytes; callables of the good lines) appended; a
    refusal (`error`) or, error None, a figure that must be made with a warning matching `warn`."""
    def build(d):
        import scoreprobe.errors as errors
        from scoreprobe.viz.trainlog import plot_train_log
        src = d if run is None else run(d)
        log = src / "train_log.jsonl"
        good = log.read_bytes()
        extra = [x(good) if callable(x) else x for x in lines]
        log.write_bytes(good + b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in extra))
        out = d.parent / "log.png"
        argv = ["plot-log", src, "--out", out]
        if error is None:
            return Made(lambda: plot_train_log(src).savefig(io.BytesIO(), format="png"), argv, out, warn)
        return Attempt(lambda: plot_train_log(src), argv, getattr(errors, error))
    return build


def _huge_log(d):
    import scoreprobe.errors as errors
    from scoreprobe.limits import MAX_LOG_BYTES
    from scoreprobe.viz.trainlog import plot_train_log
    with open(d / "train_log.jsonl", "r+b") as f:
        f.truncate(MAX_LOG_BYTES + 1)     # sparse: no time spent writing it
    return Attempt(lambda: plot_train_log(d), ["plot-log", d, "--out", d.parent / "log.png"], errors.DataError)


def _run_meta_broken(edit, warn):
    def build(d):
        from scoreprobe.viz.trainlog import plot_train_log
        edit(d)
        return Made(lambda: plot_train_log(d).savefig(io.BytesIO(), format="png"),
                    ["plot-log", d, "--out", d.parent / "log.png"], d.parent / "log.png", warn)
    return build


def _set_run(key, value):
    def edit(d):
        meta = json.loads((d / "run.json").read_text())
        meta[key] = value
        (d / "run.json").write_text(json.dumps(meta))
    return edit


REC = '{"step": 4, "loss": %s}'


def cases():
    """[(name, surface, build)]."""
    attr = lambda name, value: _bad_store(attrs={name: value})        # noqa: E731
    report = [
        *[(f"store_attr_{n}_{tag}", "report", attr(n, v)) for n, tag, v in [
            ("n_boot", "img", VECTORS[0]), ("n_boot", "bool", True), ("n_boot", "negative", -1),
            ("rule_threshold", "img", VECTORS[0]), ("rule_threshold", "null", None), ("rule_threshold", "2", 2.0), ("mem_threshold", "list", [0.1]),
            ("novel_threshold", "dict", {"a": 1}), ("tau_rule", "string", "1e3"), ("tau_mem", "script", VECTORS[1]),
            ("tau_rule_ci", "string", "x"), ("tau_rule_ci", "three", [1, 2, 3]), ("ci", "string", "0.95"),
            ("ci", "percent", 95), ("window_log10_width", "string", "0.3"), ("window_open", "string", "false"),
            ("window_open", "int", 1), ("window_intervals", "img", VECTORS[0]), ("window_intervals", "short", [[1]]),
            ("under_resolved", "string", "tau_rule"), ("under_resolved", "numbers", [1, 2]),
            ("window_hi_censored", "string", "no"), ("novel_oracle", "list", []),
            ("tau_rule_reached", "string", "x"), ("window_open_share", "dict", {})]],
        ("store_attr_window_open_missing", "report", _bad_store(drop=("window_open",))),
        ("store_labelled_basins", "report", _bad_store(config={"probe": "basins"})),
        ("store_labelled_score_field", "report", _bad_store(config={"probe": "score_field"})),
        ("store_basins_labelled_clocks", "report", _bad_store("basins", config={"probe": "clocks"})),
        ("store_labelled_unknown_probe", "report", _bad_store(config={"probe": "<img src=x onerror=alert(1)>"})),
        ("store_record_steps_duplicate", "report", _bad_store(record={"steps": [0, 0, 12]})),
        ("store_record_steps_float", "report", _bad_store(record={"steps": [0, 4.5, 12]})),
        ("store_record_steps_string", "report", _bad_store(record={"steps": ["0", "4", "12"]})),
        ("store_record_steps_bool", "report", _bad_store(record={"steps": [False, True, 12]})),
        ("store_record_not_object", "report", _bad_store(record="<img src=x>")),
        ("store_record_digests_string", "report", _bad_store(record={"digests": "x"})),
        ("store_record_models_string", "report", _bad_store(record={"models": "x"})),
        ("store_meta_40mb", "report", _bad_store(attrs={"padding": "x" * (40 << 20)})),
        ("cache_is_a_file", "report", _cache_is_file),
        ("cache_attr_n_boot_img", "report", _bad_cache(attrs={"n_boot": VECTORS[0]})),
        ("cache_record_steps_duplicate", "report", _bad_cache(record={"steps": [0, 0, 12]})),
        *[(f"size_{name}", "report", _bad_size(**{k: v})) for name, k, v in [
            ("res_5000", "res", 5000), ("field_res_5000", "field_res", 5000), ("res_1", "res", 1),
            ("sigma_start_nan", "sigma_start", [float("nan")]), ("sigma_start_inf", "sigma_start", [0.5, float("inf")]),
            ("sigma_start_negative", "sigma_start", [-1.0]), ("retention_sigmas_1e30", "retention_sigmas", [1e30]),
            ("dsm_noise_1e7", "dsm_noise", 10**7), ("retention_noise_1e8", "retention_noise", 10**8),
            ("retention_items_1e9", "retention_items", 10**9), ("n_samples_1e12", "n_samples", 10**12),
            ("n_steps_1e9", "n_steps", 10**9), ("seed_2_64", "seed", 2**64), ("seed_negative", "seed", -1),
            ("dsm_sigmas_1e9", "dsm_sigmas", 10**9), ("dsm_heldout_1e12", "dsm_heldout", 10**12)]],
        ("size_page_2000x2000", "report", _bad_size(res=2000, field_res=2000)),
        ("page_under_resolved_vectors", "report", _page(attrs={"under_resolved": VECTORS})),
        ("page_numbers_null", "report", _page(attrs=dict.fromkeys(
            ("mem_threshold", "novel_threshold", "novel_oracle", "tau_rule_reached",
             "window_open_share", "window_log10_width", "tau_mem", "n_boot", "ci", "tau_rule_ci", "window_intervals",
             "under_resolved", "window_hi_censored")))),
        ("page_window_open_with_null_width", "report", _page(attrs={"window_open": True, "window_intervals": [[0, 12]],
                                                                    "window_log10_width": None,
                                                                    "window_log10_width_ci": [None, 0.5]})),
        ("page_history_vectors", "report", _page(attrs={"history": "\n".join(VECTORS)})),
        ("page_history_1mb", "report", _page(attrs={"history": VECTORS[0] * 20000})),
        ("page_config_key_vectors", "report", _page(config={"note": VECTORS, VECTORS[1]: VECTORS[0]})),
        ("page_record_extra_vectors", "report", _page(record={"note": VECTORS})),
        ("page_basins_history_vectors", "report", _page("basins", attrs={"history": "\n".join(VECTORS)})),
        ("page_run_json_data_seed", "report", _page(run=_run_json(data_seed=VECTORS[0]))),
        ("page_run_json_parameterization", "report", _page(run=_run_json(parameterization=VECTORS[1]))),
        ("page_run_dir_named_img", "report", _page(run=_renamed("<img src=x onerror=alert(1)>"))),
    ]
    plot = [
        ("log_loss_by_sigma_string", "plot-log", _log(['{"step": 4, "loss": 0.1, "loss_by_sigma": "abc"}'])),
        ("log_loss_by_sigma_list", "plot-log", _log(['{"step": 4, "loss": 0.1, "loss_by_sigma": [1, 2]}'])),
        ("log_bucket_not_numeric", "plot-log", _log(['{"step": 4, "loss": 0.1, "loss_by_sigma": {"sigma<0.1": "x"}}'])),
        ("log_bucket_bool", "plot-log", _log(['{"step": 4, "loss": 0.1, "loss_by_sigma": {"sigma<0.1": true}}'])),
        ("log_bucket_400_digits", "plot-log", _log(['{"step": 4, "loss": 0.1, "loss_by_sigma": {"a": %s}}' % ("9" * 400)])),
        ("log_loss_true", "plot-log", _log([REC % "true"])),
        ("log_loss_string", "plot-log", _log([REC % '"0.1"'])),
        ("log_loss_negative", "plot-log", _log([REC % "-0.5"])),
        ("log_loss_400_digits", "plot-log", _log([REC % ("9" * 400)])),
        ("log_step_400_digits", "plot-log", _log(['{"step": %s, "loss": 0.1}' % ("9" * 400)])),
        ("log_step_negative", "plot-log", _log(['{"step": -5, "loss": 0.1}'])),
        ("log_step_float", "plot-log", _log(['{"step": 4.5, "loss": 0.1}'])),
        ("log_step_missing", "plot-log", _log(['{"loss": 0.1}'])),
        ("log_too_large", "plot-log", _huge_log),
        ("log_only_garbage", "plot-log", lambda d: ((d / "train_log.jsonl").write_bytes(b"{not json\n[1]\n"),
                                                    _log([])(d))[1]),
        ("log_loss_infinity", "plot-log", _log([REC % "Infinity", REC % "NaN"], None, r"2 of \d+ records have a non-finite")),
        ("log_nested_100000", "plot-log", _log(["[" * 100000 + "]" * 100000], None, r"1 of \d+ lines .* skipped")),
        ("log_nested_in_object", "plot-log", _log(['{"step": 4, "loss": 0.1, "x": ' + "[" * 5000 + "]" * 5000 + "}"],
                                                  None, None)),    # a record: its other fields are not read
        ("log_line_1mb", "plot-log", _log(['{"step": 4, "loss": 0.1, "x": "%s"}' % ("x" * (1 << 20))], None,
                                          r"1 of \d+ lines .* skipped")),
        ("log_not_utf8", "plot-log", _log([b"\xff\xfe{\"step\": 4}"], None, r"1 of \d+ lines .* skipped")),
        ("log_cut_short", "plot-log", _log(['{"step": 4, "lo'], None, r"1 of \d+ lines .* skipped")),
        ("log_mathtext_bucket", "plot-log", _log(['{"step": 4, "loss": 0.1, "loss_by_sigma": {"$\\\\frac{1}{$": 0.1}}'],
                                                 None, None)),
        ("log_mathtext_run_name", "plot-log", _log([], None, None, run=_renamed("run$\\frac{1}{$x"))),
        ("log_run_json_nested", "plot-log", _run_meta_broken(
            lambda d: (d / "run.json").write_text("[" * 100000 + "]" * 100000), "unreadable")),
        ("log_checkpoint_steps_strings", "plot-log", _run_meta_broken(_set_run("checkpoint_steps", ["a", "b"]),
                                                                     "checkpoint_steps is not a list")),
        ("log_checkpoint_steps_400_digits", "plot-log", _run_meta_broken(_set_run("checkpoint_steps", [10**400]),
                                                                        "checkpoint_steps is not a list")),
        ("log_extended_from_string", "plot-log", _run_meta_broken(_set_run("extended_from", "12"),
                                                                 "extended_from is not a list")),
        ("log_checkpoint_steps_100000", "plot-log", _run_meta_broken(_set_run("checkpoint_steps", list(range(100000))),
                                                                    "more than 1000 are not marked")),
    ]
    return report + plot


# ---------------------------------------------------------------------------------------------
# Classifying an attempt
# ---------------------------------------------------------------------------------------------

def _stores_state(cache):
    """{store: zarr.json bytes} of the report cache (what a computation would change)."""
    return {p.name: (p / "zarr.json").read_bytes() if (p / "zarr.json").is_file() else b""
            for p in sorted(cache.glob("*.zarr"))} if cache.is_dir() else {}


def _made(attempt, cwd):
    """(outcome, detail) of an attempt that must make its file through the API and the CLI."""
    import re
    from scoreprobe.errors import ScoreprobeError
    for how in ("api", "cli"):
        if os.path.exists(attempt.out):
            os.remove(attempt.out)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if how == "api":
                try:
                    attempt.api()
                except ScoreprobeError as e:
                    return "refused", f"{type(e).__name__}: {e}"
                except Exception as e:     # noqa: BLE001
                    return "traceback", f"{type(e).__name__}: {e}"
                err = ""
            else:
                outcome, err = _cli(attempt.argv, cwd)
                if outcome != "clean":
                    return outcome, err
        said = " ".join(str(w.message) for w in caught) + " " + err
        if attempt.warn and not re.search(attempt.warn, said):
            return "wrong reason", f"{how}: no warning matching {attempt.warn!r} (got {said[:200]!r})"
        if how == "cli" and not os.path.exists(attempt.out):
            return "silent", "the CLI wrote nothing"
        if attempt.out.suffix == ".html":
            if how == "api" and not os.path.exists(attempt.out):
                return "silent", "no page written"
            if os.path.exists(attempt.out):
                found = injected_markup(Path(attempt.out).read_text(encoding="utf-8"))
                if found:
                    return "injection ran", f"{how}: {found[:5]}"
    return "clean", "made"


def _cli(argv, cwd):
    """('clean', stderr) when the CLI exits 0 without a traceback, else ('traceback' | 'refused', stderr)."""
    from scoreprobe.cli import main
    err, old = io.StringIO(), os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                main([*map(str, argv)])
                code = 0
            except SystemExit as e:
                code = e.code
            except Exception as e:     # noqa: BLE001
                return "traceback", f"{type(e).__name__}: {e}"
    finally:
        os.chdir(old)
    text = err.getvalue()
    if "Traceback" in text:
        return "traceback", text
    return ("clean", text) if code in (0, None) else ("refused", text)


def run_report_attempt(build, d, cwd):
    """(outcome, detail) of one attempt of `cases()` built in the run copy `d`, CLI run from `cwd`:
    abuse_attempt.run_attempt's outcomes, plus "late refusal" (a report store was written or changed
    before the refusal), "injection ran" (a page holds markup from the data) and "refused" (a page
    that should have been made was refused)."""
    cache = d.parent / "r.cache"
    attempt = build(d)
    before = _stores_state(cache)
    if isinstance(attempt, Made):
        outcome = _made(attempt, cwd)
    else:
        outcome = abuse_attempt.run_attempt(lambda _: attempt, d, cwd)
        if outcome[0] in ("clean", "slow", "wrong reason") and _stores_state(cache) != before:
            return "late refusal", f"a report store changed before the refusal: {outcome[1]}"
    if (d.parent / "MARKER").exists():
        return "code execution", "a hostile pickle ran"
    return outcome
