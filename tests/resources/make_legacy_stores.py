"""Written with nbflow before the layered refactor: a paused checkpointed run, a failed node, a batch row, a cache."""

import dataclasses
import fractions
import pathlib
import sys

import nbflow as nf

# Run once, with nbflow 0.1.0 on the path: PYTHONPATH=<0.1.0 checkout> python make_legacy_stores.py tests/resources


def main() -> None:
    out = pathlib.Path(sys.argv[1])

    flow = nf.Flow("legacy_review", cache=str(out / "legacy_cache.db"))

    @dataclasses.dataclass
    class Draft:  # not JSON: pickled
        text: str

    @flow.node
    def draft(topic: str) -> dict:
        return {"text": f"about {topic}", "n": 3}

    @flow.node(on_error=nf.Default("n/a"))
    def broken(draft: dict) -> str:
        raise ValueError("broken on purpose")

    @flow.node
    async def review(draft: dict, broken: str) -> str:
        return await nf.ask("Publish?", options=["yes", "no"], data=draft)

    run = flow.run(topic="tea", store=str(out / "legacy_runs.db"))
    assert run.status is nf.RunStatus.PAUSED, run.summary()
    (out / "legacy_run_id.txt").write_text(run.run_id)
    bflow = nf.Flow("legacy_batch")
    bflow.node(lambda topic: fractions.Fraction(len(topic), 3), name="ratio")
    df = bflow.batch([{"topic": "a"}, {"topic": "bb"}], store=str(out / "legacy_batch.db"))
    (out / "legacy_batch_id.txt").write_text(df.attrs["batch_id"])
    print(run.run_id, df.attrs["batch_id"])


if __name__ == "__main__":
    main()
