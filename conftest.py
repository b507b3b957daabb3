"""Test set-up for the code blocks of README.md and docs/*.md (``pytest --markdown-docs``).

Each ```` ```python ```` block is a test (pytest-markdown-docs). A block marked ``continuation`` runs
after the blocks before it on the same page; one marked ``notest`` is a fragment that is not meant
to run. Blocks with top-level ``await`` run on pytest-asyncio's loop, as they would in a notebook cell.

Two rules on top of the plugin's:

* every block runs in a fresh temporary directory (``store="runs.db"`` never lands in the repo);
* a block that leaves a FAILED ``nf.Run`` or a batch DataFrame with failed rows in its names fails,
  with the node and its error: an example whose flow breaks is a broken example, even when no
  exception reaches the top. A block marked ``runner:ShowsFailures`` is the opposite: it is an
  example of a failure (opening a failed row, reading its traceback) and fails when it leaves none.
"""

from __future__ import annotations

from typing import Any

import pytest

MARKER = "markdown-docs"


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "markdowndocs", False):
        _install_runner()


@pytest.fixture(autouse=True)
def _markdown_block_in_tmp_dir(request: pytest.FixtureRequest, tmp_path: Any, monkeypatch: pytest.MonkeyPatch):
    if request.node.get_closest_marker(MARKER) is not None:
        monkeypatch.chdir(tmp_path)
    yield


def _install_runner() -> None:
    # The plugin's runner API is not public yet (pytest-markdown-docs 0.9): the version is pinned
    # below 0.10 in pyproject.toml, and an import error here fails the whole session loudly.
    from pytest_markdown_docs._runners import DefaultRunner, register_runner

    @register_runner(default=True)
    class CheckRunsRunner(DefaultRunner):
        """The default runner, then: no failed run or failed batch row may be left behind."""

        def runtest(self, test: Any, args: dict[str, Any], *, asyncio_runner: Any = None) -> None:
            super().runtest(test, args, asyncio_runner=asyncio_runner)
            problems = [p for name, value in list(args.items()) for p in _failures(name, value)]
            if problems:
                raise AssertionError("the example left failures behind:\n" + "\n".join(problems))

    @register_runner()
    class ShowsFailures(DefaultRunner):
        """An example of a failure: it must leave a failed run or failed batch rows in its names."""

        def runtest(self, test: Any, args: dict[str, Any], *, asyncio_runner: Any = None) -> None:
            super().runtest(test, args, asyncio_runner=asyncio_runner)
            if not any(_failures(name, value) for name, value in list(args.items())):
                raise AssertionError("an example of a failure left no failed run or failed row behind")


def _failures(name: str, value: Any) -> list[str]:
    import nbflow as nf

    if isinstance(value, nf.Run) and value.status is nf.RunStatus.FAILED:
        failed = [
            f"  {name}: node {node!r} FAILED: {record.error_type}: {record.error_message}"
            for node, record in value.nodes.items()
            if record.status is nf.NodeStatus.FAILED
        ]
        return failed or [f"  {name}: run FAILED"]
    if type(value).__name__ == "DataFrame" and {"status", "run_id"} <= set(getattr(value, "columns", ())):
        bad = value[value["status"] == "failed"]
        return [
            f"  {name}: row {index} failed in {row.get('error_node')!r}: {row.get('error_type')}: {row.get('error_message')}"
            for index, row in bad.head(3).iterrows()
        ]
    return []
