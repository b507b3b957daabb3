import nbflow as nf


def test_quickstart_runs():
    flow = nf.Flow("qa")

    @flow.node
    def retrieve(question: str, k: int = 2) -> list[str]:
        return [f"{question}-{i}" for i in range(k)]

    @flow.node
    async def answer(question: str, retrieve: list[str]) -> str:
        return f"{question}:{len(retrieve)}"

    run = flow.run(question="q")
    assert run.status is nf.RunStatus.SUCCEEDED
    assert run["answer"] == "q:2"
