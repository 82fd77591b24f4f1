import pytest
import torch


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
