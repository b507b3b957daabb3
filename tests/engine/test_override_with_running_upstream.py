"""An overridden node whose upstream still runs (another node needs it) is never run after all."""

from __future__ import annotations

import pytest

import nbflow as nf


@pytest.mark.parametrize("policy", [False, True])
def test_an_overridden_node_keeps_its_given_output_when_its_upstream_runs(policy: bool) -> None:
    flow = nf.Flow("override")
    ran: list[str] = []

    @flow.node
    def raw(n: int) -> int:
        return n

    @flow.node(retry=nf.Retry(attempts=2)) if policy else flow.node
    def model(raw: int) -> float:
        ran.append("model")
        return 1.0

    @flow.node
    def report(model: float, raw: int) -> float:
        return model + raw

    run = flow.run(n=3, overrides={"model": 1.5}, show=False)
    assert run.status is nf.RunStatus.SUCCEEDED  # (with a retry policy it raised StateTransitionError)
    assert run["model"] == 1.5 and run["report"] == 4.5  # (without one, model ran after all: 1.0)
    assert ran == [] and run.nodes["model"].overridden
