"""A column of ``nf.Secret`` in a DataFrame built the ordinary way: pandas (3) gives strings their own dtype,
so the values reach the batch as plain ``str``. The batch marks them as secrets again (their texts are
those of ``nf.Secret`` values made in this process), warns, and nothing of them reaches the store, even
when a node echoes them in its output or its error message."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

import nbflow as nf

TOKEN = "sk-proj-Zq81mXw4Kp0vRt5Ly"


def echoing_flow() -> nf.Flow:
    flow = nf.Flow("echo_secret")

    @flow.node
    def call(x: int, key: str) -> str:
        if x == 1:
            raise PermissionError(f"the server refused the key {key}")
        return f"used {key} ({len(key)} characters)"

    return flow


@pytest.mark.parametrize("keep", ["all", "none"])
@pytest.mark.parametrize("as_records", [False, True])
def test_a_pandas_column_of_secrets_stays_out_of_the_store(tmp_path: Path, keep: str, as_records: bool) -> None:
    frame = pd.DataFrame({"x": [0, 1, 2], "key": [nf.Secret(TOKEN)] * 3})
    assert type(frame["key"].iloc[0]) is str  # what pandas does: the marking is gone before nbflow sees it
    rows = frame.to_dict("records") if as_records else frame
    db = tmp_path / "runs.db"
    with pytest.warns(nf.NbflowWarning, match=r"\['key'\].*nf\.Secret.*dtype=object"):
        out = echoing_flow().batch(rows, store=str(db), keep=keep, progress=False)
    assert list(out["status"]) == ["succeeded", "failed", "succeeded"]
    # The node got the text itself, and the frame in memory keeps everything (as documented).
    assert out.loc[0, "call"] == f"used {TOKEN} ({len(TOKEN)} characters)"
    assert TOKEN in out.loc[1, "error_message"]
    written = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert written and TOKEN.encode() not in written
    # What was stored reads back with the secret redacted, the row that echoed it included.
    again = nf.load_batch(db, out.attrs["batch_id"])
    assert len(again) == 3 and not any(TOKEN in repr(v) for v in again.to_numpy().ravel())
    assert "the server refused the key" in again.loc[again["x"] == 1, "error_message"].iloc[0]


def test_ordinary_text_is_left_alone(tmp_path: Path) -> None:
    with_secret_column = pd.DataFrame({"x": [0], "key": pd.Series([nf.Secret(TOKEN)], dtype=object)})
    db = tmp_path / "runs.db"
    with warnings.catch_warnings():
        warnings.simplefilter("error", nf.NbflowWarning)  # dtype=object keeps the marking: nothing to warn about
        echoing_flow().batch(with_secret_column, store=str(db), progress=False)
        plain = echoing_flow().batch(pd.DataFrame({"x": [2], "key": ["not-a-secret-value"]}), progress=False)
    assert plain.loc[0, "call"] == "used not-a-secret-value (18 characters)"
    assert TOKEN.encode() not in db.read_bytes()
