# %% [markdown]
# # A data pipeline: scikit-learn on a bundled dataset
#
# Load → clean → features → split → three models → evaluate → report, on scikit-learn's breast
# cancer dataset (shipped with scikit-learn, no download). What this notebook shows:
#
# - `outputs=` gives one node several outputs (`split` → `X_train`, `X_test`, ...), wired by name;
# - `executor="process"` runs CPU-bound training in worker processes: an interrupt stops it;
# - nodes receive copy-on-write copies of DataFrames: one node cannot change another's input;
# - the cache follows meaning: a docstring edit re-runs nothing, an identical-output edit stops there;
# - lineage (`flow.upstream`, `flow.downstream`, `flow.to_dot(targets=...)`), `keep=` and `save=`.

# %%
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import StandardScaler

import nbflow as nf

flow = nf.Flow("cancer", cache=True)
OUT = Path(tempfile.mkdtemp())


@flow.node
def load() -> pd.DataFrame:
    data = load_breast_cancer(as_frame=True)
    return data.frame


@flow.node
def clean(load: pd.DataFrame) -> pd.DataFrame:
    """Drop rows with missing values and duplicate rows."""
    return load.dropna().drop_duplicates().reset_index(drop=True)


@flow.node
def features(clean: pd.DataFrame) -> pd.DataFrame:
    out = clean.copy()
    out["area_ratio"] = out["worst area"] / out["mean area"]
    return out


@flow.node(outputs=("X_train", "X_test", "y_train", "y_test"))
def split(features: pd.DataFrame, seed: int = 0) -> tuple:
    X = features.drop(columns="target")
    y = features["target"]
    return train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)


@flow.node
def scaler(X_train: pd.DataFrame) -> StandardScaler:
    return StandardScaler().fit(X_train)


@flow.node(executor="process")
def logistic(X_train: pd.DataFrame, y_train: pd.Series, scaler: StandardScaler) -> LogisticRegression:
    return LogisticRegression(max_iter=2000).fit(scaler.transform(X_train), y_train)


@flow.node(executor="process")
def forest(X_train: pd.DataFrame, y_train: pd.Series, n_trees: int = 100) -> RandomForestClassifier:
    return RandomForestClassifier(n_estimators=n_trees, random_state=0, n_jobs=1).fit(X_train, y_train)


@flow.node(executor="process")
def knn(X_train: pd.DataFrame, y_train: pd.Series, scaler: StandardScaler) -> KNeighborsClassifier:
    return KNeighborsClassifier(n_neighbors=7).fit(scaler.transform(X_train), y_train)


@flow.node
def evaluate(
    logistic: LogisticRegression,
    forest: RandomForestClassifier,
    knn: KNeighborsClassifier,
    scaler: StandardScaler,
    X_test: pd.DataFrame,
    y_test: pd.Series,
) -> pd.DataFrame:
    rows = []
    for name, model, X in [
        ("logistic", logistic, scaler.transform(X_test)),
        ("forest", forest, X_test),
        ("knn", knn, scaler.transform(X_test)),
    ]:
        proba = model.predict_proba(X)[:, 1]
        rows.append({"model": name, "accuracy": accuracy_score(y_test, proba > 0.5), "auc": roc_auc_score(y_test, proba)})
    return pd.DataFrame(rows).set_index("model")


@flow.node
def report(evaluate: pd.DataFrame) -> str:
    best = evaluate["auc"].idxmax()
    return f"best model: {best} (AUC {evaluate.loc[best, 'auc']:.3f})"


# %% [markdown]
# The graph, and the lineage of one node: what feeds it, what it feeds.

# %%
flow

# %%
# NBVAL_CHECK_OUTPUT
print(flow.upstream("forest"))
print(flow.downstream("scaler"))

# %% [markdown]
# Run it. The three models train in worker processes (`executor="process"`), in parallel.

# %%
run = flow.run(show=False)
print(run.status.name)

# %%
# NBVAL_CHECK_OUTPUT
print(run["report"].split(" (")[0])
print(run["evaluate"].round(2).index.tolist(), (run["evaluate"]["auc"] > 0.95).all())

# %% [markdown]
# ## A cache that follows meaning
# A docstring or comment edit re-runs nothing; an edit whose output is identical re-runs that node only.

# %%
@flow.node
def clean(load: pd.DataFrame) -> pd.DataFrame:
    """Drop rows with missing values, then duplicates (the docstring changed)."""
    # and a comment
    return load.dropna().drop_duplicates().reset_index(drop=True)


again = flow.run(show=False)
# NBVAL_CHECK_OUTPUT
print("re-ran:", [n for n, r in again.nodes.items() if not r.cached])


# %%
@flow.node
def clean(load: pd.DataFrame) -> pd.DataFrame:
    out = load.drop_duplicates().dropna()  # another order, same rows
    return out.reset_index(drop=True)


again = flow.run(show=False)
# NBVAL_CHECK_OUTPUT
print("re-ran:", [n for n, r in again.nodes.items() if not r.cached])

# %% [markdown]
# ## Isolation
# A node that changes its input in place changes only its own copy.

# %%
@flow.node
def careless(features: pd.DataFrame) -> int:
    features["oops"] = 0  # in place: on this node's copy-on-write copy only
    return features.shape[1]


run = flow.run(show=False)
# NBVAL_CHECK_OUTPUT
print(run["careless"], "oops" in run["features"].columns)
flow.remove("careless")

# %% [markdown]
# ## Keep only what you need, save what matters
# `keep=` drops intermediates once nothing needs them; `save=` writes outputs (parquet, csv, json,
# png) and records them in the run; `nf.load` reads one back.

# %%
run = flow.run(
    n_trees=50,
    keep=["evaluate", "report"],
    save={"features": OUT / "features.parquet", "evaluate": OUT / "evaluate.csv"},
    show=False,
)
# NBVAL_CHECK_OUTPUT
print(sorted(run.saved))
print(nf.load(run.saved["features"]).shape)
try:
    run["features"]
except nf.NodeOutputError as exc:
    print(type(exc).__name__)

# %% [markdown]
# Drawing only what a target needs:

# %%
flow.to_dot(targets="knn")
