import pytest
import torch

# --suite-budget / SCOREPROBE_SUITE_BUDGET_S: CI fails a suite slower than its budget, naming the slowest tests
from suite_budget import pytest_addoption, pytest_configure, pytest_sessionfinish, pytest_terminal_summary  # noqa: F401


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# Tests use tiny models: one thread avoids oversubscription on small shared machines.
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def shipped():
    """The shipped series' last checkpoint (EMA denoiser) and its dataset."""
    import scoreprobe as sp
    series = sp.load_series()
    return series.denoiser(36000), series.dataset
