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


@pytest.fixture
def forget_generated_secrets():
    """For property tests that make ``nf.Secret``s of generated text: every Secret made is learned for the whole
    process (its text redacted wherever it appears), and Hypothesis draws text from the constants of the code under
    test, so a generated ``nf.Secret("succeeded")`` redacted every later test's status column (32 tests failed in one
    full run). The texts learned during the test are forgotten after it."""
    from nbflow._core import secrets

    known, marked = secrets._KNOWN.texts, set(secrets._MARKED)
    yield
    if secrets._KNOWN.texts != known:
        secrets._KNOWN.texts = known
        secrets._KNOWN.version += 1  # (redactors built meanwhile rebuild)
    secrets._MARKED.intersection_update(marked)
