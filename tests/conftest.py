import pytest

import nbflow as nf


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(autouse=True)
def _check_mutation():
    """Every test runs with the mutation check on: a node changing its input in place fails loudly."""
    nf.config.check_mutation = True
    try:
        yield
    finally:
        nf.config.check_mutation = False
