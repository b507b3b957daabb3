"""A stored grid sweep with large shared upstream frames: the store's bytes against its unique values, and the
wall time of the batch with ``store=`` against the same batch without one.

The shape of issue 34: a ``raw`` DataFrame of a few MB (``--samples`` rows x 12 float columns) is split into
``X_train`` / ``X_test`` / ``y_train`` / ``y_test`` frames, which feed three model-fit-and-score nodes (ridge, a
decision tree, a small random forest; sklearn). A grid of ``alpha`` x ``depth`` gives 24 rows whose upstream
frames are identical. Every row's run is kept (``keep="all"``, the default with a store).

- **bytes**: the store file (after the batch closed it: the write-ahead log folded in) against the bytes of its
  unique values: every node output and recorded input of the kept runs, counted once per data version (the
  digest the node cache uses), each encoded by the store's own codec (``dumps``: parquet for a frame). The
  hand-written baseline is "each distinct value written once"; the goal (issue 34) is <= 1.2x.
- **time**: the same batch with ``store=`` (a fresh file each round) and without, interleaved round by round in
  one process; wall time, min and median of the rounds. Goal: <= 1.1x.
- **shared input** (``--shape input``): the same grid, but the ``raw`` frame is given to every row as a flow input
  (a case cell of each row, and each kept run's input) instead of computed by a node; its bytes count among the
  unique values once. ``--shape both`` (the default) runs the two shapes one after the other.

    python benchmarks/store_sweep.py [--samples 60000] [--rounds 3] [--concurrency 4] [--shape node|input|both]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import nbflow as nf

COLUMNS = 12


def make_raw(samples: int, seed: int = 0) -> Any:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    data = rng.normal(size=(samples, COLUMNS))
    frame = pd.DataFrame(data, columns=[f"f{i}" for i in range(COLUMNS)])
    frame["y"] = (frame["f0"] + 0.5 * frame["f1"] ** 2 + rng.normal(0, 0.1, samples) > 0.5).astype("int64")
    return frame


def make_flow(shape: str = "node") -> nf.Flow:
    import pandas as pd
    import sklearn.ensemble
    import sklearn.linear_model
    import sklearn.tree  # noqa: F401  (imported here: four rows importing sklearn at once in threads can fail)

    flow = nf.Flow(f"store_sweep_{shape}")

    if shape == "node":

        @flow.node
        def raw(samples: int, seed: int = 0) -> pd.DataFrame:
            return make_raw(samples, seed)

    def cut(raw: pd.DataFrame) -> int:
        return int(len(raw) * 0.75)

    @flow.node
    def X_train(raw: pd.DataFrame) -> pd.DataFrame:
        return raw.drop(columns="y").iloc[: cut(raw)]

    @flow.node
    def X_test(raw: pd.DataFrame) -> pd.DataFrame:
        return raw.drop(columns="y").iloc[cut(raw) :]

    @flow.node
    def y_train(raw: pd.DataFrame) -> pd.Series:
        return raw["y"].iloc[: cut(raw)]

    @flow.node
    def y_test(raw: pd.DataFrame) -> pd.Series:
        return raw["y"].iloc[cut(raw) :]

    @flow.node
    def ridge_score(
        X_train: pd.DataFrame, y_train: pd.Series, X_test: pd.DataFrame, y_test: pd.Series, alpha: float
    ) -> float:
        from sklearn.linear_model import RidgeClassifier

        return float(RidgeClassifier(alpha=alpha).fit(X_train, y_train).score(X_test, y_test))

    @flow.node
    def tree_score(
        X_train: pd.DataFrame, y_train: pd.Series, X_test: pd.DataFrame, y_test: pd.Series, depth: int
    ) -> float:
        from sklearn.tree import DecisionTreeClassifier

        return float(
            DecisionTreeClassifier(max_depth=depth, random_state=0).fit(X_train, y_train).score(X_test, y_test)
        )

    @flow.node
    def forest_score(
        X_train: pd.DataFrame, y_train: pd.Series, X_test: pd.DataFrame, y_test: pd.Series, depth: int
    ) -> float:
        from sklearn.ensemble import RandomForestClassifier

        model = RandomForestClassifier(n_estimators=8, max_depth=depth, random_state=0, n_jobs=1)
        return float(model.fit(X_train, y_train).score(X_test, y_test))

    return flow


GRID: dict[str, list[Any]] = {"alpha": [0.01, 0.1, 1.0, 10.0], "depth": [2, 3, 4, 5, 6, 8]}  # 24 rows


def sweep(flow: nf.Flow, case: dict[str, Any], concurrency: int, store: str | None) -> tuple[Any, float, float]:
    """(frame, wall seconds, CPU seconds of the process: every thread)."""
    t0, c0 = time.perf_counter(), time.process_time()
    frame = flow.batch([case], grid=GRID, store=store, keep="all", concurrency=concurrency, progress=False)
    spent, cpu = time.perf_counter() - t0, time.process_time() - c0
    failed = frame[frame["status"] != "succeeded"]
    if len(failed):
        raise SystemExit(
            f"{len(failed)} rows did not succeed: {failed[['status', 'error_message']].head(3).to_dict('records')}"
        )
    return frame, spent, cpu


def unique_value_bytes(frame: Any) -> tuple[int, int, int]:
    """(bytes of the distinct values, number of distinct values, number of values) of the kept runs' node
    outputs and recorded inputs, each distinct value (by data version) encoded once by the store's codec."""
    from nbflow._engine.caching import data_version
    from nbflow._store.pickling import dumps

    seen: dict[str, int] = {}
    count = 0
    for run in frame.nbflow.runs():
        for value in run.inputs.values():  # (the shared-input shape's frame; the other's is a node's output)
            count += 1
            version = data_version(value)
            assert version is not None
            seen.setdefault(version, len(dumps(value)))
        for rec in run.nodes.values():
            for value in (rec.output, *rec.inputs.values()):
                count += 1
                version = data_version(value)
                assert version is not None
                if version not in seen:
                    seen[version] = len(dumps(value))
    return sum(seen.values()), len(seen), count


def file_bytes(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=60_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--shape", choices=["node", "input", "both"], default="both")
    args = parser.parse_args(argv)
    for shape in ("node", "input") if args.shape == "both" else (args.shape,):
        measure(shape, args)


def measure(shape: str, args: argparse.Namespace) -> None:
    flow = make_flow(shape)
    case: dict[str, Any] = {"samples": args.samples} if shape == "node" else {"raw": make_raw(args.samples)}
    plain, _, _ = sweep(flow, case, args.concurrency, None)  # warm-up (imports), and the values to count
    unique, distinct, total = unique_value_bytes(plain)
    raw = case.get("raw")
    raw_bytes = (raw if raw is not None else plain.nbflow.run(0).nodes["raw"].output).memory_usage(deep=True).sum()
    print(
        f"[{shape}] {len(plain)} rows; raw frame {raw_bytes / 1e6:.1f} MB in memory; {total} recorded values, "
        f"{distinct} distinct, {unique / 1e6:.2f} MB encoded once"
    )
    without: list[float] = []
    with_store: list[float] = []
    cpu_without: list[float] = []
    cpu_store: list[float] = []
    sizes: list[int] = []
    with tempfile.TemporaryDirectory() as folder:
        for r in range(args.rounds):
            _, spent, cpu = sweep(flow, case, args.concurrency, None)
            without.append(spent)
            cpu_without.append(cpu)
            path = os.path.join(folder, f"runs-{r}.db")
            _, spent, cpu = sweep(flow, case, args.concurrency, path)
            with_store.append(spent)
            cpu_store.append(cpu)
            sizes.append(file_bytes(path))
    size = sizes[-1]
    print(f"[{shape}] store file: {size / 1e6:.2f} MB = {size / unique:.2f}x its unique values (goal <= 1.2x)")
    lo, med = min(with_store) / min(without), statistics.median(with_store) / statistics.median(without)
    print(
        f"wall time without a store: min {min(without):.2f}s, median {statistics.median(without):.2f}s; "
        f"with store=: min {min(with_store):.2f}s, median {statistics.median(with_store):.2f}s"
    )
    paired = statistics.median(s / w for s, w in zip(with_store, without, strict=True))
    print(f"[{shape}] store= / no store: {lo:.2f}x (min), {med:.2f}x (median), {paired:.2f}x (paired) (goal <= 1.1x)")
    cpu = statistics.median(s / w for s, w in zip(cpu_store, cpu_without, strict=True))
    print(
        f"CPU time of the process (every thread): without {statistics.median(cpu_without):.2f}s, with store= "
        f"{statistics.median(cpu_store):.2f}s (median); paired {cpu:.2f}x"
    )
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores, {args.rounds} rounds, concurrency {args.concurrency}"
    )


if __name__ == "__main__":
    main()
