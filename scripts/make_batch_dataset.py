"""Write notebooks/data/arith_eval.csv: 60 arithmetic cases, generated deterministically (no downloads).

    python scripts/make_batch_dataset.py

The dataset of notebooks/04_batch_eval.ipynb (built from notebooks/src/04_batch_eval.py by
scripts/make_notebook.py).
"""

from __future__ import annotations

import csv
import operator
import random
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "notebooks" / "data" / "arith_eval.csv"
OPS = [("plus", operator.add), ("minus", operator.sub), ("times", operator.mul)]


def main(n: int = 60, seed: int = 5) -> None:
    rng = random.Random(seed)
    DATA.parent.mkdir(parents=True, exist_ok=True)
    with DATA.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["case_id", "question", "expected", "difficulty"])
        for i in range(n):
            name, fn = OPS[i % 3]
            hard = i % 4 == 3
            a, b = rng.randint(10, 999 if hard else 99), rng.randint(2, 40)
            w.writerow([f"c{i:03d}", f"What is {a} {name} {b}?", str(fn(a, b)), "hard" if hard else "easy"])
    print(f"wrote {DATA}")


if __name__ == "__main__":
    main()
