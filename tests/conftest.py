import pytest

import nbflow as nf


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(autouse=True, scope="session")
def _store_key_outside_home(tmp_path_factory):
    """Stores sign their pickled parts with a per-user key (nbflow/_store/trust.py): keep the test
    run's key in a temporary config folder, never in the real ~/.config."""
    import os

    folder = tmp_path_factory.mktemp("nbflow-config")
    old = os.environ.get("NBFLOW_CONFIG_DIR")
    os.environ["NBFLOW_CONFIG_DIR"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("NBFLOW_CONFIG_DIR", None)
    else:
        os.environ["NBFLOW_CONFIG_DIR"] = old


@pytest.fixture(autouse=True)
def _check_mutation():
    """Every test runs with the mutation check on: a node changing its input in place fails loudly."""
    nf.config.check_mutation = True
    try:
        yield
    finally:
        nf.config.check_mutation = False
