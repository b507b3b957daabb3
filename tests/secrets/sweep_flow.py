"""The flows and the secrets of the value sweep (tests/secrets/test_value_sweep.py, tests/kernel/test_secret_sweep_kernel.py).

``write_flow_module(dir)`` writes a real module (a flow file the command line loads too): one node per credential
name that echoes its value, nodes that leak token-shaped values under plain names, a URL's password, and a key the
node reads from ``os.environ`` itself, into outputs, errors and a table.
"""

from __future__ import annotations

from pathlib import Path

from tests.secrets.test_secret_names import CREDENTIAL_NAMES

PARAMS = [n for n in CREDENTIAL_NAMES if n.isidentifier()]  # a node parameter each
HEADERS = [n for n in CREDENTIAL_NAMES if not n.isidentifier()]  # "X-API-Key": a key of a dict input
BY_NAME = {name: f"cred{i:02d}-vX9qR2mT" for i, name in enumerate(CREDENTIAL_NAMES)}  # no token shape
TOKENS = {  # token-shaped values under plain names
    "client": "sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2",
    "anth": "sk-ant-api03-Zz9Yy8Xx7Ww6Vv5Uu4Tt3",
    "gh": "ghp_Ab3dEf6hIj9kLm2oPq5sTu8wXy1zAb4dEf7h",
    "ghfine": "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
    "slack": "xoxb-123456789012-abcdefABCDEF",
    "aws": "AKIAIOSFODNN7SWEEP01",
    "header_value": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJzd2VlcCJ9.c2lnbmF0dXJlX3N3ZWVw",
    "dburl": "postgresql://sweeper:Sw33pPassw0rd@db.example/app",
}
DB_PASSWORD = "Sw33pPassw0rd"
ENVIRONMENT = {  # read by a node from os.environ: nbflow is never given them
    "SWEEP_OPENAI_KEY": "envkey-Sweep-0123456789",  # secret by name
    "SWEEP_SERVICE_CONF": "sk-envshape-abcdefghijklmnop1234",  # secret by shape under a plain name
}
TEXTS = [*BY_NAME.values(), *TOKENS.values(), DB_PASSWORD, *ENVIRONMENT.values()]


def inputs() -> dict[str, object]:
    given: dict[str, object] = {name: BY_NAME[name] for name in PARAMS}
    given["headers"] = {name: BY_NAME[name] for name in HEADERS}
    given.update(TOKENS)
    return given


def flow_source(name: str = "sweep") -> str:
    lines = [
        "import os",
        "import types",
        "",
        "import pandas as pd",
        "",
        "import nbflow as nf",
        "",
        f"flow = nf.Flow({name!r})",
        "",
    ]
    for i, param in enumerate(PARAMS):
        lines += ["@flow.node", f"def echo_{i:02d}({param}: str) -> str:", f"    return 'got ' + {param}", ""]
    lines += [
        "@flow.node",
        "def sent(headers: dict) -> str:",
        "    return '; '.join(f'{k}: {v}' for k, v in headers.items())",
        "",
        "@flow.node",
        f"def tokens({', '.join(f'{t}: str' for t in TOKENS)}) -> dict:",
        f"    return {{'all': [{', '.join(TOKENS)}]}}",
        "",
        "@flow.node",
        "def table(tokens: dict) -> pd.DataFrame:",
        "    return pd.DataFrame({'value': tokens['all'], 'n': range(len(tokens['all']))})",
        "",
        "@flow.node",
        "def holder(anth: str) -> types.SimpleNamespace:",
        "    return types.SimpleNamespace(key=anth)",
        "",
        "@flow.node",
        "def db_error(dburl: str) -> str:",
        "    password = dburl.split(':')[2].split('@')[0]",
        "    raise ConnectionError(f'password authentication failed ({password})')",
        "",
        "@flow.node",
        "def from_env(client: str) -> str:",
        "    return os.environ['SWEEP_OPENAI_KEY'] + ' ' + os.environ['SWEEP_SERVICE_CONF']",
        "",
        "@flow.node",
        "def env_error(from_env: str) -> str:",
        "    raise PermissionError(f\"rejected key {os.environ['SWEEP_OPENAI_KEY']} ({from_env})\")",
        "",
    ]
    return "\n".join(lines)


def write_flow_module(directory: Path, module: str = "sweepflow", name: str = "sweep") -> Path:
    path = directory / f"{module}.py"
    path.write_text(flow_source(name))
    return path
