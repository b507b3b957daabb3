"""What the code-free form of stored values (nbflow/_store/plain.py) costs against the signed pickle it
replaces, per value, written and read back, in the same run.

- nbflow: ``pickling.dumps`` / ``loads`` (JSON, else the code-free form) and a batch row's column
  (``batch_store.encode_row`` + JSON parse + decode);
- baseline: the previous path, a pickle tagged with the user's key (``sign_pickle(pickled(v))``),
  verified and unpickled on read (base64 in a JSON row for batch stores).

    python benchmarks/plain_values.py [--repeat 2000]

Reported as µs per value (write + read) and the ratio code-free / pickle.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import decimal
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pydantic

from nbflow._store import pickling, plain
from nbflow._store.batch_store import _decode, encode_row


class Answer(pydantic.BaseModel):
    text: str
    score: float
    tags: list[str]


VALUES: dict[str, Any] = {
    "tuple (3 items)": (1, "a", 2.5),
    "datetime": dt.datetime(2024, 1, 2, 3, 4, 5),
    "decimal": decimal.Decimal("12.30"),
    "pydantic model": Answer(text="an answer of a few words", score=0.5, tags=["a", "b"]),
    "dict of tuples (20)": {f"k{i}": (i, str(i)) for i in range(20)},
    "ndarray 1,000 float64": np.linspace(0, 1, 1000),
    "DataFrame 100x4": pd.DataFrame(
        {"a": range(100), "b": np.linspace(0, 1, 100), "c": [f"s{i}" for i in range(100)], "d": [True] * 100}
    ),
    "DataFrame 10,000x4": pd.DataFrame(
        {"a": range(10_000), "b": np.linspace(0, 1, 10_000), "c": [f"s{i}" for i in range(10_000)], "d": [1.5] * 10_000}
    ),
}


def _time(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - t0) / repeat)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    print(
        f"{'value':24} {'ckpt plain µs':>14} {'ckpt pickle µs':>15} {'ratio':>6} {'row plain µs':>13} "
        f"{'row pickle µs':>14} {'ratio':>6} {'bytes plain/pickle':>19}"
    )
    for name, value in VALUES.items():
        n = max(20, args.repeat // (200 if "10,000" in name else 1))
        blob = plain.to_bytes(value)
        signed = pickling.sign_pickle(pickling.pickled(value))
        ckpt_plain = _time(lambda: pickling.loads(pickling.dumps(value)), n)  # noqa: B023
        ckpt_pickle = _time(lambda: pickling.loads(pickling.sign_pickle(pickling.pickled(value))), n)  # noqa: B023

        def row_plain() -> Any:
            text = encode_row({"v": value})  # noqa: B023
            return _decode(json.loads(text)["v"], True)

        def row_pickle() -> Any:
            data = pickling.sign_pickle(pickling.pickled(value))  # noqa: B023
            text = json.dumps({"v": {"__nbflow_signed__": base64.b64encode(data).decode("ascii")}})
            return pickling.loads(base64.b64decode(json.loads(text)["v"]["__nbflow_signed__"]))

        rp, rk = _time(row_plain, n), _time(row_pickle, n)
        print(
            f"{name:24} {ckpt_plain:14.1f} {ckpt_pickle:15.1f} {ckpt_plain / ckpt_pickle:6.2f} {rp:13.1f} "
            f"{rk:14.1f} {rp / rk:6.2f} {len(blob) / len(signed):19.2f}"
        )


if __name__ == "__main__":
    main()
