# %% [markdown]
# # Inspecting a run: the live view
#
# In a notebook, `flow.run(...)`, `await flow.arun(...)` and `flow.start(...)` display a live view of the run: a header (status, time, counts by state), the graph coloured by state as events arrive, the errors at the top, the graph on the left (zoom, pan, search) and the node inspector on the right (click a node, or pick it in the selector) with its output, error and traceback, attempts and inputs. See `docs/widgets.md`.

# %%
import pandas as pd

import nbflow as nf

flow = nf.Flow("shop")

# %%
@flow.node
def orders(n: int) -> pd.DataFrame:
    """Load the orders (here: made up)."""
    return pd.DataFrame({"item": [f"item{i}" for i in range(n)], "price": [1.5 * i for i in range(n)]})


@flow.node
def revenue(orders: pd.DataFrame) -> float:
    return float(orders["price"].sum())


@flow.node
def summary(orders: pd.DataFrame, revenue: float) -> dict:
    return {"orders": len(orders), "revenue": revenue, "top": orders.iloc[-1]["item"]}


@flow.node
def report(summary: dict, api_key: str) -> str:
    """Render the report (fails: the template is missing)."""
    raise ValueError(f"no report template for {summary['orders']} orders")


@flow.node
def email(report: str) -> str:
    return report

# %% [markdown]
# Running it shows the live view. `api_key` looks like a secret, so the view masks it (and its value, wherever it would appear).

# %%
run = flow.run(n=5, api_key="sk-demo-123456")

# %% [markdown]
# The same view, any time later: display the run. Its selector lists every node with its state; the inspector starts on the first failure.

# %%
run

# %% [markdown]
# The view is an ordinary widget: build one yourself to choose the node it shows.

# %%
from nbflow.widgets import RunView

view = RunView(run)
view.select("orders")
view

# %% [markdown]
# What the view shows is in the run record too (text outputs below are checked by nbval).

# %%
# NBVAL_CHECK_OUTPUT
print(run.status)
print({name: rec.status.value for name, rec in run.nodes.items()})

# %%
# NBVAL_CHECK_OUTPUT
rec = run.nodes["report"]
print(rec.error_type, "-", rec.error)
print(rec.traceback.strip().splitlines()[-1])
print(run.nodes["email"].skip_reason)

# %%
# NBVAL_CHECK_OUTPUT
print(view.selected)
print("sk-demo-123456" in view.inspector, "••••••" in RunView(run).inspector)

# %% [markdown]
# Turn the live view off for one run with `show=False`, or for every run with `nf.config.show = False`. A background run (`flow.start`) gets a Cancel button.

# %%
# NBVAL_CHECK_OUTPUT
quiet = flow.run(n=3, api_key="x", show=False)
print(quiet.status, quiet["revenue"])

# %%
handle = flow.start(n=3, api_key="sk-demo-123456")
await handle
