"""The ``nbflow`` command (also ``python -m nbflow``): run, batch, show and resume flows from a terminal.

Built on argparse (stdlib: the console script adds no dependency and keeps Python's conventions,
``--help`` everywhere and exit code 2 for usage errors) and rich (progress bar, trees, tables; plain
text when the output is not a terminal). Results go to stdout, everything else to stderr.

Exit codes: 0 the run or batch succeeded; 1 it failed (a node failed, rows failed, or it was
cancelled); 2 a usage error (bad arguments, a flow that cannot be found or loaded, bad inputs);
3 the run is paused on a question (``nbflow resume``); 130 interrupted (Ctrl-C). See docs/cli.md.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from nbflow._cli_io import (
    RESULT_FORMATS,
    CliError,
    _safe,
    _SourceError,
    assignments,
    batch_rows,
    env_secrets,
    grid_values,
    inputs_file,
    load_flow,
    mapping,
    read_cases,
    recall_source,
    remember_source,
)
from nbflow._core.errors import BatchError, BatchInterrupted, NbflowError, RunInterrupted
from nbflow._core.secrets import Redactor, Secret, gate, is_secret_name, learn_environment, secret_texts
from nbflow._core.states import RunStatus

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console
    from rich.text import Text

    from nbflow._flow.flow import Flow
    from nbflow._record.batch_progress import BatchProgress
    from nbflow._record.run import NodeRecord, Run

__all__ = ["main"]

OK, FAILED, USAGE, PAUSED, INTERRUPTED = 0, 1, 2, 3, 130
_SYMBOL = {
    "succeeded": ("✓", "green"),
    "failed": ("✗", "red"),
    "skipped": ("-", "dim"),
    "cancelled": ("⊘", "yellow"),
    "paused": ("?", "magenta"),
    "running": ("…", "cyan"),
    "pending": ("·", "dim"),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not the usage block
        self.exit(USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    from nbflow import __version__

    p = _Parser(prog="nbflow", description="Run nbflow flows from a terminal: one run, a batch, stored runs.")
    p.add_argument("--version", action="version", version=f"nbflow {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    def target(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "target", metavar="PATH:FLOW", help="a module (pkg.flows:flow), a .py file or a notebook .ipynb"
        )

    def values(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--input", "-i", action="append", default=[], metavar="NAME=VALUE",
            help="a flow input (repeatable): NAME=text, NAME:=json, NAME=@file; secret-looking names are never echoed or stored",
        )  # fmt: skip
        sp.add_argument(
            "--secret", action="append", default=[], metavar="NAME=ENV_VAR",
            help="the input NAME from an environment variable, as an nf.Secret (repeatable)",
        )  # fmt: skip

    def tracing(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--trace",
            action="store_true",
            help="send OpenTelemetry spans over OTLP/HTTP (OTEL_EXPORTER_OTLP_* variables)",
        )
        sp.add_argument("--otlp-endpoint", metavar="URL", help="the OTLP/HTTP endpoint (implies --trace)")

    r = sub.add_parser("run", help="run a flow once", description="Run a flow once and print its nodes as a tree.")
    target(r)
    values(r)
    r.add_argument("--inputs", metavar="FILE.json", help="inputs as a JSON object (--input wins)")
    r.add_argument("--store", metavar="RUNS.db", help="checkpoint the run in this SQLite file (resumable)")
    r.add_argument(
        "--target", dest="targets", action="append", metavar="NODE", help="run only what this node needs (repeatable)"
    )
    r.add_argument("--timeout", type=float, metavar="SECONDS", help="the run's deadline")
    r.add_argument("--show-outputs", action="store_true", help="print every output in full, not shortened")
    tracing(r)

    b = sub.add_parser(
        "batch",
        help="run a flow once per case, to a results file",
        description="Run a flow once per case (× grid), write the results.",
    )
    target(b)
    b.add_argument("cases", metavar="CASES", help="cases file: .csv, .jsonl, .json or .parquet")
    b.add_argument("-o", "--output", metavar="RESULTS", help="results file: .parquet, .csv or .jsonl")
    b.add_argument(
        "--columns", action="append", default=[], metavar="COL=INPUT", help="feed input INPUT from column COL"
    )
    b.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=VALUES",
        help="KEY=@values.json, KEY=[json], or KEY=VALUE repeated",
    )
    values(b)
    b.add_argument("--outputs", metavar="NODE,...", help="output nodes (default: the flow's leaves)")
    b.add_argument("--concurrency", type=int, default=16, metavar="N", help="rows in flight (default 16)")
    b.add_argument("--store", metavar="RUNS.db", help="commit every finished row to this SQLite file")
    b.add_argument("--resume", action="store_true", help="reuse rows already finished in --store")
    b.add_argument("--retry-failed", action="store_true", help="with --resume: run failed rows again")
    b.add_argument(
        "--reuse",
        metavar="NAME",
        help="with --store: reuse the stored rows of batch/experiment NAME, re-running only the nodes changed since",
    )
    b.add_argument("--batch-id", metavar="ID", help="name the batch (default: from the flow and the rows)")
    b.add_argument("--experiment", metavar="NAME", help="with --store: store the batch as this named experiment")
    b.add_argument("--notes", metavar="TEXT", help="with --experiment: a note kept with it (what changed)")
    b.add_argument("--timeout", type=float, metavar="SECONDS", help="deadline of the whole batch")
    b.add_argument("--row-timeout", type=float, metavar="SECONDS", help="deadline of each row")
    b.add_argument("--max-consecutive-failures", type=int, metavar="N", help="stop after N failed rows in a row")
    b.add_argument(
        "--keep",
        metavar="WHICH",
        help="which rows keep their full run record: failed, all (default with --store), none, or NODE,... (every "
        "row, with only these nodes' outputs)",
    )
    b.add_argument("--flatten", action="store_true", help="dict/model outputs as node.field columns")
    b.add_argument("--no-progress", action="store_true", help="no progress display")
    tracing(b)

    s = sub.add_parser(
        "show",
        help="list stored runs and experiments (batches), or show one",
        description="List what a store holds, or show one run, or one experiment (batch) per variant.",
    )
    s.add_argument("store", metavar="RUNS.db")
    s.add_argument("id", nargs="?", metavar="RUN_ID|EXPERIMENT|BATCH_ID")
    s.add_argument("--flow", metavar="PATH:FLOW", help="load this flow first (its classes unpickle stored outputs)")
    s.add_argument("--show-outputs", action="store_true", help="print every output in full, not shortened")
    s.add_argument("--lineage", metavar="NODE", help="a run's lineage for NODE and what is upstream of it only")
    s.add_argument(
        "--row",
        metavar="ROW",
        help="of an experiment: one row (its index), with its run's tree and captured output when the store kept "
        "it, and its lineage",
    )

    ln = sub.add_parser(
        "lineage",
        help="a stored run's lineage, or its OpenLineage events",
        description="Which code and data produced a stored run's values (as `nbflow show` prints it), or with "
        "--openlineage the run as OpenLineage RunEvents, one JSON object a line (docs/lineage.md).",
    )
    ln.add_argument("store", metavar="RUNS.db")
    ln.add_argument("run_id", metavar="RUN_ID")
    ln.add_argument("--node", metavar="NODE", help="only NODE and what is upstream of it (not with --openlineage)")
    ln.add_argument("--openlineage", action="store_true", help="OpenLineage RunEvents as JSON lines")
    ln.add_argument("--namespace", default="nbflow", help="the OpenLineage namespace of the jobs and datasets")
    ln.add_argument("-o", "--output", metavar="FILE", help="write to FILE (JSON lines) instead of stdout")
    ln.add_argument("--flow", metavar="PATH:FLOW", help="load this flow first (its classes unpickle stored outputs)")

    g = sub.add_parser(
        "gc",
        help="free the stored values no run refers to any more",
        description="Delete the stored values that no run of the store refers to (those of deleted batches and "
        "runs), then compact the file. Safe while another process writes to it.",
    )
    g.add_argument("store", metavar="RUNS.db")

    z = sub.add_parser(
        "resume",
        help="answer a paused run and continue it",
        description="Answer a paused run's question and continue it.",
    )
    z.add_argument("store", metavar="RUNS.db")
    z.add_argument("run_id", metavar="RUN_ID")
    z.add_argument("--answer", "-a", metavar="ANSWER", help="the answer (JSON for a question with a schema)")
    z.add_argument("--question", metavar="KEY", help="which open question it answers (when there are several)")
    z.add_argument(
        "--force",
        action="store_true",
        help="take over a run another process holds RUNNING (only if you know that process is gone)",
    )
    z.add_argument(
        "--flow", metavar="PATH:FLOW", help="where the flow is defined (default: where `nbflow run` found it)"
    )
    values(z)
    z.add_argument("--show-outputs", action="store_true", help="print every output in full, not shortened")
    tracing(z)

    v = sub.add_parser(
        "view",
        help="browse stores' experiments in a local web page (read-only)",
        description="Serve a read-only viewer of the stores' experiments on 127.0.0.1 (a free port, a token per "
        "start) and open it in the browser: experiments, one experiment's summary and rows, comparisons, a row's "
        "graph and node details. Ctrl-C stops it.",
    )
    v.add_argument("stores", nargs="+", metavar="RUNS.db")
    v.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    v.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to bind (default 127.0.0.1; ::1 for IPv6; an address that is not loopback warns)",
    )
    v.add_argument("--no-browser", action="store_true", help="print the URL only")

    o = sub.add_parser(
        "report",
        help="write one experiment (or a comparison) as one self-contained HTML file",
        description="Write an experiment of a store as one HTML file (no network, no server: data and scripts "
        "inline), with --vs the comparison of two experiments.",
    )
    o.add_argument("store", metavar="RUNS.db")
    o.add_argument("experiment", metavar="EXPERIMENT")
    o.add_argument("--vs", metavar="OTHER", help="another experiment of the store to compare with")
    o.add_argument("-o", "--output", metavar="REPORT.html", default="report.html", help="where to write it")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: parse ``argv``, run the command, return its exit code."""
    args = _parser().parse_args(argv)
    out, err = _consoles()
    learn_environment()  # what this command prints or writes never holds a secret environment variable's value
    provider = None
    try:
        if getattr(args, "trace", False) or getattr(args, "otlp_endpoint", None):
            from nbflow import config
            from nbflow.otel import otlp_provider

            provider = otlp_provider(args.otlp_endpoint)
            config.trace = provider
        command = {
            "run": _run,
            "batch": _batch,
            "show": _show,
            "resume": _resume,
            "gc": _gc,
            "lineage": _lineage,
            "view": _view,
            "report": _report,
        }[args.command]
        return int(command(args, out, err))
    except _SourceError as exc:
        err.print(f"nbflow {args.command}: error: {gate(str(exc))}", style="red", markup=False, highlight=False)
        err.print(gate(exc.traceback.rstrip()), markup=False, highlight=False)
        return USAGE
    except NbflowError as exc:
        message = " ".join(str(exc).split())
        missing = getattr(exc, "missing", None)
        how = getattr(exc, "how", None)  # MissingInputError's "Pass x=... to run()"
        if isinstance(missing, dict) and isinstance(how, str) and args.command == "run":  # the command line's way
            given = " ".join(f"--input {k}=..." for k in missing)
            message = message.replace(" ".join(how.split()), f"Pass {given}")
        err.print(f"nbflow {args.command}: error: {_scrub(message, args)}", style="red", markup=False, highlight=False)
        return USAGE
    finally:
        if provider is not None:
            provider.shutdown()  # sends the spans still buffered


def _consoles() -> tuple[Console, Console]:
    from rich.console import Console

    def make(stderr: bool) -> Console:
        stream = sys.stderr if stderr else sys.stdout
        tty = stream.isatty()
        # Not a terminal (CI, cron, a pipe): no colour, no wrapping of long lines.
        width = None if tty or "COLUMNS" in os.environ else 200  # tables keep their headers in logs
        return Console(
            stderr=stderr, soft_wrap=not tty, highlight=False, width=width, no_color=not tty or "NO_COLOR" in os.environ
        )

    return make(False), make(True)


def _scrub(text: str, args: argparse.Namespace) -> str:
    """Secret texts given on this command line, removed from a message."""
    given = {}
    for item in getattr(args, "input", []) or []:
        name, _, value = item.partition("=")
        given[name.rstrip(":")] = value
    for item in getattr(args, "secret", []) or []:
        name, sep, var = item.partition("=")
        given[name] = os.environ.get(var if sep else name, "")
    return Redactor(secret_texts(given))(text)


# --- nbflow view / nbflow report ------------------------------------------------------------------
def _view(args: argparse.Namespace, out: Console, err: Console) -> int:
    import warnings

    from nbflow._view.server import serve

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            viewer = serve(args.stores, host=args.host, port=args.port, browser=not args.no_browser)
        except OSError as exc:
            err.print(f"nbflow view: error: cannot listen on {args.host}:{args.port}: {exc}", style="red", markup=False)
            return USAGE
    for w in caught:
        err.print(f"warning: {w.message}", style="yellow", markup=False, highlight=False)
    try:
        viewer.serve_forever()
    except KeyboardInterrupt:
        err.print("nbflow view: stopped", markup=False)
    return 0


def _report(args: argparse.Namespace, out: Console, err: Console) -> int:
    from nbflow._view.report import report_store

    path = report_store([args.store], args.experiment, args.output, vs=args.vs)
    size = path.stat().st_size
    out.print(f"wrote {path} ({size / 1e6:.2f} MB)", markup=False, highlight=False)
    return 0


# --- nbflow run ------------------------------------------------------------------------------------
def _run_inputs(flow: Any, args: argparse.Namespace) -> dict[str, Any]:
    inputs: dict[str, Any] = inputs_file(flow, args.inputs) if getattr(args, "inputs", None) else {}
    inputs.update(assignments(flow, args.input))
    inputs.update(env_secrets(args.secret))
    return inputs


def _run(args: argparse.Namespace, out: Console, err: Console) -> int:
    flow, source = load_flow(args.target)
    inputs = _run_inputs(flow, args)
    if args.store:
        remember_source(args.store, flow.name, source)
    try:
        # A flow input named "show" would clash with show=False (docs/engine.md); outside a kernel
        # show=None displays nothing either.
        show = None if "show" in flow.inputs else False
        run = flow.run(inputs, targets=args.targets, store=args.store, timeout=args.timeout, show=show)
    except RunInterrupted as exc:
        _print_run(exc.run, out, err, args)
        err.print(f"interrupted: run {exc.run.run_id} cancelled; finished nodes kept", style="yellow", markup=False)
        return INTERRUPTED
    return _print_run(run, out, err, args)


def _print_run(run: Run, out: Console, err: Console, args: argparse.Namespace) -> int:
    """The run's summary line, its tree, then failures with tracebacks; returns the exit code."""
    secrets = Redactor.for_inputs(run.inputs)
    full = getattr(args, "show_outputs", False)
    status = run.status.value
    dur = f" in {run.duration:.2f}s" if run.duration is not None else ""
    counts = ", ".join(f"{v} {k}" for k, v in run.counts().items())
    why = f" ({secrets(run.reason)})" if run.reason else ""
    head = _text(
        f"run {run.run_id} of flow {run.flow!r}: {status.upper()}{dur} ({counts}){why}",
        _SYMBOL.get(status, ("", ""))[1],
    )
    out.print(head)
    out.print(_tree(run, secrets, full))
    failed = [(p, r) for p, r in run.walk() if r.status.value == "failed" and r.error is not None]
    for path, rec in failed:
        err.print(_text(f"\nnode {path!r} failed: {rec.error_type}: {secrets(str(rec.error))}", "red bold"))
        if rec.traceback:
            err.print(_text(secrets(rec.traceback.rstrip()), "dim"))
    if status == "paused":
        store = getattr(run.store, "path", None)
        for key, q in run.pending.items():
            opts = f" options: {', '.join(q.options)}" if q.options else ""
            out.print(_text(f"question {key}: {secrets(q.prompt)}{opts}", "magenta"))
        if store is not None:
            hint = f"nbflow resume {shlex.quote(str(store))} {run.run_id} --answer ANSWER"
            if len(run.pending) > 1:
                hint += " --question KEY"
            err.print(_text(f"paused: answer with  {hint}", "magenta"))
        else:
            err.print(_text("paused, but not stored: run again with --store RUNS.db to answer it later", "magenta"))
        return PAUSED
    return OK if status == "succeeded" else FAILED


_OUTPUT_LINES = 40  # lines of a node's captured output shown (all with --show-outputs)


def _print_output(run: Run, out: Console, full: bool) -> None:
    """What each node printed, logged and warned, per attempt, as a cell's output reads (kept redacted)."""
    for path, rec in run.walk():
        shown = [a for a in rec.attempts if a.output] if rec.printed is not None else []
        for a in shown:
            which = f" (attempt {a.number} of {len(rec.attempts)})" if len(rec.attempts) > 1 else ""
            out.print(_text(f"\noutput of {path}{which}:", "bold"))
            lines = (a.output or "").rstrip("\n").split("\n")
            more = 0 if full else max(0, len(lines) - _OUTPUT_LINES)
            for line in lines[: len(lines) - more]:
                out.print(_text(f"  {line}"))
            if more:
                out.print(_text(f"  [... {more} more lines: --show-outputs prints them all]", "dim"))


def _print_lineage(run: Run, out: Console, node: str | None) -> None:
    """Which code and data produced the run's values: the environment, then per node its code and output
    versions and where each input came from (``run.lineage``; versions shortened to 12 characters)."""
    if run._lineage is None:
        if node is not None:
            raise CliError(f"run {run.run_id} has no lineage stored (it was written before nbflow kept it)")
        return
    if "error" in run._lineage:
        out.print(_text(f"\nlineage: not recorded ({run._lineage['error']})", "yellow"))
        return
    _print_lineage_frame(run.lineage(node), out)


def _print_lineage_frame(frame: Any, out: Console) -> None:
    """A lineage frame (``run.lineage``, ``df.nbflow.lineage``) as ``nbflow show`` prints it."""
    env = frame.attrs.get("environment", {})
    git = env.get("git") or {}
    commit = f", git {git['commit'][:12]}{' (dirty)' if git.get('dirty') else ''}" if git else ", no git commit"
    packages = ", ".join(f"{k} {v}" for k, v in (env.get("packages") or {}).items()) or "none"
    out.print(_text(f"\nlineage: nbflow {env.get('nbflow')}, Python {env.get('python')}{commit}", "bold"))
    out.print(_text(f"  packages: {packages}", "dim"))

    def short(version: Any) -> str:
        return "-" if not isinstance(version, str) else version.removeprefix("v:")[:12]

    for name, rows in frame.groupby("node", sort=False):
        first = rows.iloc[0]
        code, output = short(first["code_version"]), short(first["output_version"])
        out.print(_text(f"  {name!s}  code {code}  output {output}"))
        for r in rows.itertuples():
            if r.parameter is None:
                continue
            if r.kind == "node":
                what = f"output of {r.source!r}"
            else:
                shown = "" if r.value is None else f" = {r.value!s}"
                what = f"{'default' if r.kind == 'default' else f'input {r.source!r}'}{shown}"
            out.print(_text(f"    {r.parameter!s}: {what}  [{short(r.data_version)}]", "dim"))


def _tree(run: Run, secrets: Redactor, full: bool) -> Any:
    from rich.tree import Tree

    root = Tree(_text(run.flow, "bold"))
    _branch(root, run, secrets, full)
    return root


def _branch(tree: Any, run: Run, secrets: Redactor, full: bool) -> None:
    for rec in run.nodes.values():
        child = tree.add(_node_label(rec, secrets, full))
        if rec.subrun is not None:
            _branch(child, rec.subrun, secrets, full)


def _node_label(rec: NodeRecord, secrets: Redactor, full: bool) -> Text:
    from rich.text import Text

    status = rec.status.value
    symbol, style = _SYMBOL.get(status, ("?", ""))
    label = Text(f"{symbol} ", style=style)
    label.append(rec.name, style="bold")
    extra = []
    if rec.duration is not None and not rec.cached:
        extra.append(f"{rec.duration * 1000:.1f}ms" if rec.duration < 1 else f"{rec.duration:.2f}s")
    if len(rec.attempts) > 1:
        extra.append(f"{len(rec.attempts)} attempts")
    if rec.cached:
        extra.append("cached")
    if rec.items is not None:
        extra.append(f"{len(rec.items)} items")
    if rec.recovered:
        extra.append(f"recovered from {rec.error_type}")
    if extra:
        label.append("  " + ", ".join(extra), style="dim")
    if status == "succeeded" and rec.subrun is None:
        label.append("  " + _shown(rec.output, secrets, full))
    elif rec.error is not None and status == "failed":
        label.append(f"  {rec.error_type}: {_clip(secrets(str(rec.error)), full)}", style="red")
    elif rec.skip_reason:
        label.append(f"  ({secrets(rec.skip_reason)})", style="dim")
    return label


def _shown(value: Any, secrets: Redactor, full: bool) -> str:
    from nbflow._core.secrets import REDACTED_TEXT

    text = REDACTED_TEXT if isinstance(value, Secret) else repr(value)
    return _clip(secrets(text), full)


def _clip(text: str, full: bool, limit: int = 120) -> str:
    if full:
        return text
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _text(text: str, style: str = "") -> Text:
    from rich.text import Text

    return Text(text, style=style)


# --- nbflow batch ----------------------------------------------------------------------------------
def _batch(args: argparse.Namespace, out: Console, err: Console) -> int:
    import pandas as pd

    if args.output is not None and not args.output.lower().endswith(RESULT_FORMATS):
        raise CliError(f"-o {args.output!r}: unknown format; use a file ending in {', '.join(RESULT_FORMATS)}")
    if args.resume and not args.store:
        raise CliError("--resume needs --store RUNS.db (the file the earlier batch wrote its rows to)")
    if args.reuse and not args.store:
        raise CliError("--reuse needs --store RUNS.db (the file the batch to reuse wrote its rows to)")
    flow, source = load_flow(args.target)
    columns = mapping(args.columns)
    frame = read_cases(args.cases, flow, columns)
    constant = {**assignments(flow, args.input), **env_secrets(args.secret)}
    for name, value in constant.items():
        if name in frame.columns:
            raise CliError(f"--input {name}: the cases file has a column {name!r} too; give it in one place")
        frame[name] = pd.Series([value] * len(frame), index=frame.index, dtype=object)  # keeps nf.Secret
    for col in frame.columns:  # the library's rule: values under secret-looking names are nf.Secret
        if is_secret_name(str(col)) and col not in constant:
            frame[col] = pd.Series(
                [Secret(v) if isinstance(v, str) else v for v in frame[col]], index=frame.index, dtype=object
            )
    grid = grid_values(flow, args.grid)
    secrets = _frame_secrets(frame, constant)
    outputs = [o for o in args.outputs.split(",") if o] if args.outputs else None
    _check_case_types(flow, args.cases, batch_rows(frame), columns, grid, outputs)
    if args.store:
        remember_source(args.store, flow.name, source)
    progress = False if args.no_progress else _BatchBar(err)
    keep: str | list[str] | None = args.keep
    if args.keep is not None and args.keep not in ("failed", "all", "none"):
        keep = [n for n in args.keep.split(",") if n]
    try:
        result = flow.batch(
            batch_rows(frame), columns=columns or None, grid=grid or None, outputs=outputs, concurrency=args.concurrency,
            flatten=args.flatten, store=args.store, resume=args.resume, retry_failed=args.retry_failed,
            batch_id=args.batch_id, max_consecutive_failures=args.max_consecutive_failures, timeout=args.timeout,
            row_timeout=args.row_timeout, progress=progress, experiment=args.experiment, notes=args.notes, keep=keep,
            reuse=args.reuse,
        )  # fmt: skip
    except BatchInterrupted as exc:
        result = exc.frame
        _finish_batch(result, args, out, err, secrets)
        done = int(result["status"].isin(["succeeded", "failed"]).sum())
        err.print(_text(f"\ninterrupted: {done} of {len(result)} rows finished", "yellow bold"))
        if args.store:
            argv = [_safe(a) for a in sys.argv[1:]]
            if "--resume" not in argv:
                argv.append("--resume")
            err.print(_text(f"they are in {args.store}; run the rest with:\n  nbflow {shlex.join(argv)}", "yellow"))
        else:
            err.print(_text("pass --store RUNS.db next time to resume an interrupted batch", "yellow"))
        return INTERRUPTED
    return _finish_batch(result, args, out, err, secrets)


def _check_case_types(flow: Flow, path: str, rows: Any, columns: dict[str, str], grid: Any, outputs: Any) -> None:
    """A cell that does not fit its input's hint stops the command before any row runs (not after the others)."""
    from nbflow._batch.cases import check_types, prepare_cases

    cases = prepare_cases(flow.graph, rows, columns or None, grid or None, outputs)
    try:
        check_types(flow.graph, cases)
    except BatchError as exc:
        raise CliError(f"cases file {path!r}: {exc}") from None


def _frame_secrets(frame: pd.DataFrame, constant: dict[str, Any]) -> Redactor:
    from nbflow._batch.save import frame_secrets

    redact = frame_secrets(frame)  # the library's rule, as df.nbflow.save applies it
    redact.add(secret_texts(constant))
    return redact


def _finish_batch(result: pd.DataFrame, args: argparse.Namespace, out: Console, err: Console, secrets: Redactor) -> int:
    import nbflow as nf

    if args.output:
        from nbflow._batch.save import write_frame

        write_frame(result, args.output, secrets)
        err.print(_text(f"wrote {len(result)} rows to {args.output}", "dim"))
    elif not args.store:
        err.print(_text("results not saved: pass -o results.parquet (or --store RUNS.db)", "yellow"))
    counts = result.attrs.get("counts", {})
    line = ", ".join(f"{v} {k}" for k, v in counts.items())
    batch_id = result.attrs.get("batch_id")
    stored = f"; batch {batch_id} in {args.store}" if args.store and batch_id else ""
    out.print(_text(f"batch of flow {result.attrs.get('flow')!r}: {len(result)} rows ({line}){stored}"))
    out.print(_summary_table(nf.summarize(result)))
    failed = result[result["status"] == "failed"]
    for idx, row in failed.head(5).iterrows():
        msg = secrets(str(row["error_message"]))
        err.print(
            _text(f"row {idx}: node {row['error_node']!r} failed: {row['error_type']}: {_clip(msg, False)}", "red")
        )
    if len(failed) > 5:
        err.print(_text(f"... and {len(failed) - 5} more failed rows (see the results file)", "red"))
    if result.attrs.get("stopped"):
        err.print(_text(f"stopped early: {secrets(result.attrs['stopped'])}", "yellow"))
    return OK if counts.get("succeeded", 0) == len(result) else FAILED


def _summary_table(summary: pd.DataFrame) -> Any:
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False)
    names = [str(n) for n in summary.index.names] if summary.index.name or summary.index.nlevels > 1 else ["batch"]
    for name in names:
        table.add_column(name, style="bold")
    for col in summary.columns:
        table.add_column(str(col), justify="right")
    for key, row in summary.iterrows():
        keys = key if isinstance(key, tuple) else (key,)
        table.add_row(*(_clip(str(k), False, 40) for k in keys), *(_fmt(v) for v in row))
    return table


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.3g}"
    return str(value)


class _BatchBar:
    """The batch progress on stderr: a rich progress bar on a terminal, a line every 5 s otherwise."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.bar: Any = None
        self.task: Any = None
        self.plain: Any = None

    def update(self, state: BatchProgress) -> None:
        if not self.console.is_terminal:
            if self.plain is None:
                from nbflow._show.text import TextProgress

                self.plain = TextProgress(sys.stderr, every=5.0)
            self.plain.update(state)
            return
        if self.bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[extra]}"),
                TimeRemainingColumn(), console=self.console, auto_refresh=False, transient=False,
            )  # fmt: skip
            self.bar.start()
            self.task = self.bar.add_task(state.flow, total=state.total, extra="")
        rate = state.rate
        extra = f"{state.failed} failed, {state.in_flight} running" + (f", {rate:.1f} rows/s" if rate else "")
        self.bar.update(self.task, completed=state.done, total=state.total, extra=extra)
        self.bar.refresh()

    def close(self, state: BatchProgress) -> None:
        if self.plain is not None:
            self.plain.close(state)
        if self.bar is not None:
            self.update(state)
            self.bar.stop()


# --- nbflow show -----------------------------------------------------------------------------------
def _existing(store: str) -> str:
    if not os.path.isfile(store):
        why = "it is a folder: give the store file in it" if os.path.isdir(store) else "the file does not exist"
        raise CliError(f"no store at {store!r}: {why} (check the path)")
    return store


# --- nbflow lineage --------------------------------------------------------------------------------
def _lineage(args: argparse.Namespace, out: Console, err: Console) -> int:
    import json

    path, runs = _open_runs(args)
    try:
        stored = {r[0]: r for r in runs.run_ids()}
        if args.run_id not in stored:
            from nbflow._core.errors import _suggest

            raise CliError(
                f"store {path!r} has no run {args.run_id!r}{_suggest(args.run_id, stored)}; `nbflow show {path}` "
                f"lists them (a batch row's run: `nbflow show {path} EXPERIMENT --row ROW` prints its lineage)"
            )
        run = _load(runs, path, args.run_id, stored[args.run_id][1], args.flow is None)
    finally:
        runs.close()
    if not args.openlineage:
        if args.output:
            raise CliError("-o writes OpenLineage events: pass --openlineage too")
        if run._lineage is None:
            raise CliError(f"run {run.run_id} has no lineage stored (it was written before nbflow kept it)")
        _print_lineage(run, out, args.node)
        return OK
    if args.node:
        raise CliError("--node is for the lineage table; --openlineage exports every node of the run")
    from nbflow._record.openlineage import openlineage_events

    lines = [json.dumps(e, default=str) for e in openlineage_events(run, namespace=args.namespace)]
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
        err.print(_text(f"wrote {len(lines)} OpenLineage events to {args.output}", "dim"))
    else:
        for line in lines:
            out.print(line, markup=False, highlight=False, soft_wrap=True)
    return OK


# --- nbflow gc -------------------------------------------------------------------------------------
def _gc(args: argparse.Namespace, out: Console, err: Console) -> int:
    from nbflow._store.batch_store import BatchStore

    path = _existing(args.store)
    with BatchStore(path) as store:
        done = store.gc()
    out.print(
        f"{path}: deleted {done.values} stored values no run refers to ({done.value_bytes / 1e6:.2f} MB); "
        f"the file shrank by {done.freed / 1e6:.2f} MB to {done.file_after / 1e6:.2f} MB",
        markup=False,
        highlight=False,
    )
    return OK


def _open_runs(args: argparse.Namespace) -> tuple[str, Any]:
    """The store ``args.store`` (it must exist) and its runs, ``--flow``'s module loaded first."""
    from nbflow._store.checkpoint import CheckpointStore

    path = _existing(args.store)
    if args.flow:
        load_flow(args.flow)
    return path, CheckpointStore(path, create=False)


def _show(args: argparse.Namespace, out: Console, err: Console) -> int:
    from nbflow._store.batch_store import BatchStore

    path, runs = _open_runs(args)
    try:
        stored = runs.run_ids()
        if args.id is None:
            return _list(path, stored, out)
        match = next((r for r in stored if r[0] == args.id), None)
        if match is not None:
            run = _load(runs, path, args.id, match[1], args.flow is None)
            _print_run(run, out, err, args)
            _print_output(run, out, args.show_outputs)
            _print_lineage(run, out, args.lineage)
            return OK
    finally:
        runs.close()
    from nbflow._batch.experiments import experiments, load_batch

    with BatchStore(path) as batches:
        listed = experiments(batches)
        names = set(listed["experiment"]) | set(listed["batch_id"])
        if args.id not in names:
            known = [r[0] for r in stored] + sorted(map(str, names))
            from nbflow._core.errors import _suggest

            raise CliError(
                f"store {path!r} has no run, experiment or batch {args.id!r}{_suggest(args.id, known)}; "
                f"`nbflow show {path}` lists them"
            )
        frame = load_batch(batches, args.id)
    if args.row is not None:
        return _show_row(frame, args, out, err)
    status = frame["status"].value_counts().to_dict()
    name = frame.attrs["experiment"]
    label = f"experiment {name}" + (f" (batch {frame.attrs['batch_id']})" if name != frame.attrs["batch_id"] else "")
    out.print(_text(f"{label}: {len(frame)} finished rows ({', '.join(f'{v} {k}' for k, v in status.items())})"))
    if frame.attrs.get("notes"):
        out.print(_text(f"notes: {frame.attrs['notes']}", "dim"))
    if len(frame):
        out.print(_summary_table(__import__("nbflow").summarize(frame)))  # one row per variant
    for idx, row in frame[frame["status"] == "failed"].head(10).iterrows():
        out.print(
            _text(
                f"row {idx} (run {row['run_id']}): node {row['error_node']!r} failed: {row['error_type']}: "
                f"{_clip(str(row['error_message']), False)}",
                "red",
            )
        )
    return OK


def _show_row(frame: Any, args: argparse.Namespace, out: Console, err: Console) -> int:
    """One row of a stored experiment: its run (tree, failures, captured output) when the store kept it, and its
    lineage either way (``df.nbflow.lineage``: a row whose run was not kept keeps its own)."""
    from nbflow._core.errors import BatchError

    try:
        label: Any = int(args.row)
    except ValueError:
        label = args.row
    if label not in frame.index:
        rows = ", ".join(map(str, frame.index[:10])) + (" ..." if len(frame) > 10 else "")
        raise CliError(f"experiment {args.id!r} has no row {args.row!r}; its rows: {rows or '(none)'}")
    row = frame.loc[label]
    try:
        run = frame.nbflow.run(label)
    except BatchError:
        run = None
    if run is not None:
        _print_run(run, out, err, args)
        _print_output(run, out, args.show_outputs)
    else:
        out.print(_text(f"row {label} (run {row['run_id']}): {str(row['status']).upper()}; its run was not kept"))
    try:
        lineage = frame.nbflow.lineage(label, args.lineage)
    except BatchError as exc:
        if args.lineage is not None:
            raise CliError(str(exc)) from None
        err.print(_text(f"no lineage: {exc}", "yellow"))
        return OK
    _print_lineage_frame(lineage, out)
    return OK


def _load(runs: Any, path: str, run_id: str, flow_name: str, may_import: bool) -> Run:
    try:
        return runs.load(run_id)
    except Exception:
        source = recall_source(path, flow_name) if may_import else None
        if source is None:
            raise
        load_flow(source)  # the flow's module defines the classes its stored outputs need
        return runs.load(run_id)


def _list(path: str, runs: list[tuple[str, str, str]], out: Console) -> int:
    from rich.table import Table

    from nbflow._batch.experiments import experiments
    from nbflow._store.batch_store import BatchStore

    with BatchStore(path) as store:
        batches = store.batches()
        listed = experiments(store)
        # Runs that batch rows kept are listed with their batch, not one line each among the runs.
        of_rows = {r.run_id for b in batches for r in store.rows(b["batch_id"], unpickle=False).values() if r.run_id}
    if not runs and not batches:
        out.print(_text(f"{path}: no runs or batches stored"))
        return OK
    alone = [r for r in runs if r[0] not in of_rows]
    if alone:
        table = Table(title="runs", title_justify="left", show_edge=False, pad_edge=False)
        for col in ("run_id", "flow", "status"):
            table.add_column(col)
        for run_id, flow, status in alone:
            table.add_row(run_id, flow, _text(status, _SYMBOL.get(status, ("", ""))[1]))
        out.print(table)
    if batches:
        # Every stored batch is an experiment (named with --experiment, else by its batch id).
        table = Table(title="experiments (batches)", title_justify="left", show_edge=False, pad_edge=False)
        for col in ("experiment", "flow", "started", "finished", "failed", "cost", "notes"):
            table.add_column(col, justify="right" if col in ("finished", "failed", "cost") else "left")
        finished = {b["batch_id"]: b["finished"] for b in batches}
        for e in listed.to_dict("records"):
            started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e["started"].timestamp()))
            notes = e["notes"] if isinstance(e["notes"], str) else ""
            table.add_row(
                str(e["experiment"]), str(e["flow"]), started, f"{finished[e['batch_id']]}/{e['rows']}",
                _text(str(e["failed"]), "red" if e["failed"] else ""), _fmt(e["cost"]), _clip(notes, False, 40),
            )  # fmt: skip
        out.print(table)
    kept = len(runs) - len(alone)
    if kept:
        out.print(_text(f"(and {kept} runs kept by batch rows: `nbflow show {path} RUN_ID` opens one)", "dim"))
    return OK


# --- nbflow resume ---------------------------------------------------------------------------------
def _resume(args: argparse.Namespace, out: Console, err: Console) -> int:
    from nbflow._store.checkpoint import CheckpointStore

    path = _existing(args.store)
    store = CheckpointStore(path, create=False)
    stored = {r[0]: r for r in store.run_ids()}
    if args.run_id not in stored:
        from nbflow._core.errors import _suggest

        raise CliError(
            f"store {path!r} has no run {args.run_id!r}{_suggest(args.run_id, stored)}; `nbflow show {path}` lists them"
        )
    _, flow_name, status = stored[args.run_id]
    if status not in ("paused", "running", "pending"):  # RUNNING: interrupted (its process is gone), or held
        raise CliError(f"run {args.run_id} is {status.upper()}, not PAUSED: there is nothing to resume")
    source = args.flow or recall_source(path, flow_name)
    if source is None:
        raise CliError(f"run {args.run_id} is of flow {flow_name!r}; say where it is defined with --flow PATH:FLOW")
    flow, _ = load_flow(source)
    if flow.name != flow_name:
        raise CliError(f"{source} is flow {flow.name!r}, but run {args.run_id} belongs to flow {flow_name!r}")
    secrets = {**assignments(flow, args.input), **env_secrets(args.secret)}
    run = store.load(args.run_id, secrets=secrets)
    if args.force:
        run._take_over()
    if run.status is RunStatus.RUNNING:
        raise CliError(
            f"run {args.run_id} is RUNNING in another live process (on another host: its heartbeat is less than a "
            f"minute old); wait for it to pause or stop, or pass --force if you know that process is gone"
        )
    answer: Any = None
    if args.answer is None:
        if run.pending:
            listed = "; ".join(
                f"{k}: {q.prompt}" + (f" [{'/'.join(q.options)}]" if q.options else "") for k, q in run.pending.items()
            )
            raise CliError(f"run {args.run_id} waits for an answer ({listed}); pass --answer ANSWER")
        from nbflow._core.missing import MISSING

        answer = MISSING
    else:
        key = args.question or (next(iter(run.pending)) if len(run.pending) == 1 else None)
        question = run.pending.get(key) if key else None
        answer = args.answer
        if question is not None and question.options is None and question.schema not in (None, str):
            import json

            try:
                answer = json.loads(args.answer)
            except ValueError:
                answer = args.answer  # validated below: the error says what the question takes
    try:
        run = flow.resume(run, answer, question=args.question)
    except RunInterrupted as exc:
        _print_run(exc.run, out, err, args)
        return INTERRUPTED
    return _print_run(run, out, err, args)
