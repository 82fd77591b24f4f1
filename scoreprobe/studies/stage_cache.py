"""A study stage's result kept on disk, reused by a rerun with the same parameters: a long measurement (hours on a
CPU) is done once, and a study that adds a stage or rewrites its report does not redo the others."""
import json
import logging
import time
from pathlib import Path

from scoreprobe.atomic import atomic_write_text

logger = logging.getLogger(__name__)


def cached_json(path, params, fn, key="params"):
    """(result, seconds) of fn() (JSON-able), or of the call saved at `path` (a .json) whose parameters equal `params`
    (compared as JSON reads them back). A computed result is saved as {key: params, "result", "seconds"}, seconds
    rounded to 0.1 s."""
    path = Path(path)
    params = json.loads(json.dumps(params))
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved[key] == params:
            return saved["result"], saved.get("seconds")
    t = time.time()
    result = fn()
    seconds = round(time.time() - t, 1)
    atomic_write_text(path, json.dumps({key: params, "result": result, "seconds": seconds}))
    logger.info("%s done in %.0f s", path.stem, seconds)
    return result, seconds
