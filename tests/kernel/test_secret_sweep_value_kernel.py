"""The value sweep in a real ipykernel: what reaches the browser holds no secret known by value.

The 64 credential names, token-shaped values under plain names, a URL's password and two keys a node reads from
``os.environ`` itself (tests/secrets/sweep_flow.py) go through a run shown live (every node selected in its view)
and displayed, a batch stopped by its circuit breaker and shown in ``nf.explore`` (every row opened), and three
exceptions raised into the cell as a user sees them: ``run.raise_for_status()`` (with its chained cause), a
``TypeValidationError`` for a secret-named input and one for a token under a plain name. Every iopub message
(comm opens and updates, display data, streams with the warnings, the cells' errors) and every file written
(stores, ``save=`` files) is searched: zero occurrences. The cells' code holds none of the secrets: they come
from the kernel's environment.
"""

from __future__ import annotations

import json

import pytest

from tests.kernel.test_secret_sweep_kernel import Kernel, _text
from tests.secrets.sweep_flow import BY_NAME, ENVIRONMENT, TEXTS, inputs, write_flow_module

pytestmark = pytest.mark.kernel

CELLS = [
    "import json, os\nimport nbflow as nf\nfrom sweepk import flow\ninputs = json.loads(os.environ['SWEEP_INPUTS'])",
    "run = flow.run(inputs, store='runs.db', show=True, save={'tokens': 'out/tokens.json', 'table': 'out/t.csv'})\n"
    "print(run.status.name)",
    "run",
    "df = flow.batch([inputs, inputs, inputs], store='batch.db', keep='all', concurrency=1,\n"
    "                max_consecutive_failures=2)\nprint(df.attrs['stopped'])",
    "nf.explore(df)",
]
RAISING = [
    "run.raise_for_status()",
    "typed = nf.Flow('typed')\n\n@typed.node\ndef by_name(GH_PAT: int) -> int:\n    return GH_PAT\n\n"
    "typed.run({'GH_PAT': inputs['GH_PAT']}, show=False)",
    "plain = nf.Flow('plain')\n\n@plain.node\ndef by_shape(gh: int) -> int:\n    return gh\n\n"
    "plain.run({'gh': inputs['gh']}, show=False)",
]


def test_no_message_to_the_browser_and_no_file_holds_a_secret_known_by_value(tmp_path):
    write_flow_module(tmp_path, "sweepk", "sweep_kernel")
    env = {**ENVIRONMENT, "SWEEP_INPUTS": json.dumps(inputs())}
    kernel = Kernel(tmp_path, env)
    raised = []
    try:
        for code in CELLS:
            kernel.execute(code)
        kernel.run_views()
        kernel.drain(quiet=3.0)
        kernel.explorer_rows({"status": "failed", "page": 0})
        kernel.drain(quiet=3.0)
        for code in RAISING:
            raised.append(kernel.execute(code, expect="error"))
    finally:
        kernel.close()

    assert [r["ename"] for r in raised] == ["RunFailedError", "TypeValidationError", "TypeValidationError"]
    texts = [_text(m) for m in kernel.messages]
    everything = "\n".join(texts)
    kinds = {m["msg_type"] for m in kernel.messages}
    assert {"comm_open", "comm_msg", "display_data", "stream", "error"} <= kinds, kinds
    leaks = [
        (m["msg_type"], t[:300]) for m, t in zip(kernel.messages, texts, strict=True) if any(s in t for s in TEXTS)
    ]
    assert not leaks, f"{len(leaks)} of {len(texts)} messages hold a secret; first: {leaks[:3]}"
    for shown in (
        "rejected key",  # the error of the node that read os.environ
        "password authentication failed",  # a URL's password in a driver's error
        "got [REDACTED]",  # an echo of a secret-named input, redacted in the view
        "circuit breaker",  # the breaker's stop, in the warning and the explorer
        "RedactedError",  # raise_for_status's chained cause
        "expected int",  # the validation errors
    ):
        assert shown in everything or shown.replace("[REDACTED]", "••••••") in everything, f"{shown!r} never sent"
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts]
    assert {"runs.db", "batch.db", "tokens.json", "t.csv"} <= {p.name for p in files}
    for path in files:
        data = path.read_bytes()
        for s in TEXTS:
            assert s.encode() not in data, f"{s!r} written to {path}"
    assert BY_NAME["GH_PAT"] not in everything
