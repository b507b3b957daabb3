"""``RunView``: the live view of one run — header, errors, graph, node inspector, Cancel button.

It subscribes to the run's events and redraws at most once per ``nbflow.config.redraw_interval``
(a burst of events costs one redraw, and the final state is always drawn on RunFinished).
Events arrive on the loop that executes the run: the kernel's for ``await flow.arun``/``flow.start``,
a worker thread's for a blocking ``flow.run`` (widget updates from that thread still reach the
browser; clicks are handled once the cell finishes).
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as W

from nbflow._core.config import config
from nbflow._core.errors import NbflowError, NbflowWarning, UnknownNodeError
from nbflow._core.events import Event, RunFinished, RunPaused
from nbflow._core.missing import MISSING
from nbflow._core.states import NodeStatus, RunStatus
from nbflow._engine.kernel import RunHandle
from nbflow.widgets.graph_pane import CLICK_JS, SvgTemplate, can_draw, first_doc_lines, looks, node_paths, table_html
from nbflow.widgets.redact import Redactor
from nbflow.widgets.render import render_value, short_value
from nbflow.widgets.style import CSS, SYMBOLS, badge, chip, chips, esc
from nbflow.widgets.throttle import Later, Throttle, call_later

if TYPE_CHECKING:
    from nbflow._graph.graph import Graph
    from nbflow._record.run import NodeRecord, Run

__all__ = ["RunView"]

MAX_SVG_NODES = 150  # above this the graph is shown as a table: a picture that big is unreadable and slow to lay out
_MAX_LISTED = 8  # errors / skip groups listed at the top before "and N more"
_MAX_ROWS = 100  # map items / loop iterations listed in the inspector


class RunView(W.VBox):
    """The live view of a Run (or of the RunHandle of ``flow.start``).

    Parts (public, read-only, for tests and custom layouts): ``header``, ``problems`` (errors at the
    top, skipped nodes and why), ``graph`` (SVG or table), ``selector`` (every node with its state),
    ``inspector`` (the chosen node's output, error and traceback, attempts, inputs) and
    ``cancel_button`` (shown for background runs). ``select(name)`` chooses a node.
    Inputs whose names look secret are masked (see ``nbflow.widgets.redact``).
    """

    def __init__(
        self,
        run: Run | RunHandle,
        *,
        handle: RunHandle | None = None,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        later: Later = call_later,
        max_svg_nodes: int = MAX_SVG_NODES,
    ) -> None:
        if isinstance(run, RunHandle):
            handle, run = run, run.run
        graph = run.graph
        if graph is None:
            raise NbflowError(f"run {run.run_id} has no graph to draw; RunView needs a Run made by Flow.run/arun/start")
        self.run: Run = run
        self.handle: RunHandle | None = handle
        self._graph: Graph = graph
        self._paths = dict(node_paths(graph))  # "node", and "subflow.node" for nodes of sub-flows
        self._later = later
        self._redact = Redactor()
        self._redact.collect(run.inputs)
        self._selected: str | None = None
        self._user_picked = False
        self._inspected: tuple[Any, ...] | None = None
        self._ticking = False
        self._closed = False
        self._setting = False  # True while the view itself changes the selector (not the user)
        self._template: SvgTemplate | None = None
        self._docs: dict[str, str] = {}
        if can_draw(graph, max_svg_nodes):
            try:
                self._template = SvgTemplate.layout(graph)
                self._docs = first_doc_lines(graph)
            except Exception as exc:  # a broken Graphviz must not break the view: fall back to the table
                self._template = None
                warnings.warn(
                    f"drawing the graph of flow {graph.name!r} failed ({type(exc).__name__}: {exc}); "
                    f"showing it as a table",
                    NbflowWarning,
                    stacklevel=2,
                )
        # Big graphs list plain names (set once); small ones show each node's state in the selector.
        self._live_labels = self._template is not None

        self.header = W.HTML(layout=W.Layout(margin="0 0 4px 0"))
        self.problems = W.HTML()
        self.graph = W.HTML(layout=W.Layout(max_height="520px", overflow="auto"))
        self.selector = W.Dropdown(description="node", options=[], value=None, layout=W.Layout(width="360px"))
        self.cancel_button = W.Button(
            description="Cancel",
            icon="stop",
            button_style="danger",
            tooltip="Cancel the run (finished outputs are kept)",
        )
        self.inspector = W.HTML()
        # A paused run's open questions, each with buttons (options) or a text box to answer it.
        self.questions = W.VBox()
        self._questions_key: tuple[Any, ...] = ()
        self._answer_task: Any = None
        # Receives node clicks from the SVG (see graph_pane.CLICK_JS); never visible.
        self._pick = W.Text(layout=W.Layout(display="none"))
        self._pick.add_class("nbflow-pick")
        self.cancel_button.on_click(self._cancel)
        self.selector.observe(self._on_select, names="value")
        self._pick.observe(self._on_pick, names="value")
        if handle is None:
            self.cancel_button.layout.display = "none"
        bar = W.HBox([self.selector, self.cancel_button], layout=W.Layout(align_items="center"))
        super().__init__([self.header, self.problems, self.questions, self.graph, bar, self.inspector, self._pick])
        self.add_class("nbflow-runview")
        self.add_class("nbflow-w")

        self.redraws = 0
        self._throttle = Throttle(
            self._redraw, config.redraw_interval if interval is None else interval, clock=clock, later=later
        )
        self._unsubscribe: Callable[[], None] | None = None
        if not self._live_labels:
            self._set_options([(name, name) for name in self._paths])
        if run.status is RunStatus.PENDING:
            # Only the header now: the first event's poke draws the rest within one interval, and a run
            # that ends sooner is drawn once, by the final redraw (a big graph is costly to draw twice).
            self.header.value = self._header_html()
            self.graph.value = '<div class="nbflow-muted nbflow-w">starting…</div>'
        else:
            self._redraw()
        if not run.status.finished:
            self._unsubscribe = run.subscribe(self._on_event)
            if run.status.finished:  # it ended (in another thread) between the check and subscribing
                self._on_event(RunFinished(run_id=run.run_id, time=time.time(), status=run.status, duration=0.0))
            elif run.status is RunStatus.RUNNING:  # shown mid-run: keep the elapsed time moving
                self._ticking = True
                self._later(1.0, self._tick)

    # --- public ----------------------------------------------------------------------------------
    @property
    def selected(self) -> str | None:
        """The node shown in the inspector."""
        return self._selected

    def select(self, node: str) -> None:
        """Show ``node`` in the inspector (as if the user picked it)."""
        if node not in self._paths:
            raise UnknownNodeError(node, self._paths)
        self._user_picked = True
        self._set_selected(node)

    def close(self) -> None:
        """Stop following the run and close the widgets."""
        self._closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._throttle.cancel()
        for child in (self.header, self.problems, self.graph, self.selector, self.cancel_button):
            child.close()
        self.inspector.close()
        self._pick.close()
        super().close()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        if isinstance(bundle, dict):
            # What text-only front ends and nbval see: stable (no run id, no timing), so a checked cell
            # that displays a run keeps passing.
            n = len(self.run.nodes)
            bundle["text/plain"] = f"<nbflow run view: flow {self.run.flow!r}, {n} node{'s' if n != 1 else ''}>"
        return bundle

    # --- events ----------------------------------------------------------------------------------
    def _on_event(self, event: Event) -> None:
        if self._closed:
            return
        if isinstance(event, RunFinished):
            self._throttle.cancel()
            if self._unsubscribe is not None:
                self._unsubscribe()
                self._unsubscribe = None
            self._throttle.flush()
            return
        if isinstance(event, RunPaused):
            # The loop that delivered the events may end now (a blocking run returns PAUSED): draw at
            # once, and forget timers scheduled on it; a resume delivers its events on a new loop.
            self._throttle.cancel()
            self._ticking = False
            self._throttle.flush()
            return
        self._throttle.poke()
        if not self._ticking:  # the elapsed time moves even when no event arrives
            self._ticking = True
            self._later(1.0, self._tick)

    def _tick(self) -> None:
        if self._closed or self.run.status is not RunStatus.RUNNING:
            self._ticking = False
            return
        self.header.value = self._header_html()
        self._later(1.0, self._tick)

    # --- drawing ---------------------------------------------------------------------------------
    def _redraw(self) -> None:
        self.redraws += 1
        run = self.run
        if not self._user_picked:
            self._auto_select()
        with self.hold_sync():
            self.header.value = self._header_html()
            self.problems.value = self._problems_html()
            self.graph.value = self._graph_html()
            if self._live_labels:
                self._update_selector()
            elif self.selector.value != self._selected:
                self._set_options(None)
            if run.status.finished:
                self.cancel_button.layout.display = "none"
            self._update_questions()
            self._refresh_inspector()

    def _header_html(self) -> str:
        run = self.run
        elapsed = run.duration
        when = _elapsed(elapsed) if elapsed is not None else "not started"
        total = len(run.nodes)
        done = sum(1 for r in run.nodes.values() if r.status.finished)
        why = getattr(run, "reason", None)  # e.g. the run's deadline passed
        reason = f'<div class="nbflow-muted">{esc(self._redact(why))}</div>' if why else ""
        return (
            f'{CSS}<div class="nbflow-w">{badge(run.status)} <b>{esc(run.flow)}</b> '
            f'<span class="nbflow-muted">run {esc(run.run_id)} · {when} · {done}/{total} done</span> '
            f"&nbsp;{chips(run.counts())}{reason}</div>"
        )

    def _problems_html(self) -> str:
        failed = [r for r in self.run.nodes.values() if r.status is NodeStatus.FAILED]
        lines: list[str] = []
        for rec in failed[:_MAX_LISTED]:
            msg = self._redact(f"{rec.error_type}: {rec.error}")
            first = msg.splitlines()[0] if msg else ""
            lines.append(f'<div class="nbflow-err">{chip("failed", rec.name)} {esc(first[:300])}</div>')
        if len(failed) > _MAX_LISTED:
            lines.append(f'<div class="nbflow-err">… and {len(failed) - _MAX_LISTED} more failed nodes</div>')
        groups: dict[tuple[str, str], list[str]] = {}
        for rec in self.run.nodes.values():
            if rec.status in (NodeStatus.SKIPPED, NodeStatus.CANCELLED):
                groups.setdefault((rec.status.value, rec.skip_reason or ""), []).append(rec.name)
        for (status, reason), names in list(groups.items())[:_MAX_LISTED]:
            shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
            lines.append(
                f"<div>{chip(status, f'{len(names)} {status}')} {esc(shown)}"
                f'<span class="nbflow-muted"> — {esc(self._redact(reason))}</span></div>'
            )
        return f'<div class="nbflow-w">{"".join(lines)}</div>' if lines else ""

    def _graph_html(self) -> str:
        if self._template is not None:
            body = self._template.render(looks(self._graph, self.run, self._selected, self._redact, self._docs))
        else:
            body = table_html(self._paths, self._record, self._selected, self._redact)
        return f'<div class="nbflow-graph nbflow-w" onclick="{CLICK_JS}">{body}</div>'

    def _update_selector(self) -> None:
        options = []
        for name in self._paths:
            rec = self._record(name)
            state = rec.status.value if rec is not None else "not in run"
            options.append((f"{SYMBOLS.get(state, '·')} {name} — {state}", name))
        if options != list(self.selector.options):
            self._set_options(options)
        elif self.selector.value != self._selected:
            self._set_options(None)

    def _set_options(self, options: list[tuple[str, str]] | None) -> None:
        """Set the selector's options (None: keep them) and its value, without it counting as a user pick."""
        self._setting = True
        try:
            if options is not None:
                self.selector.options = options
            self.selector.value = self._selected
        finally:
            self._setting = False

    def _auto_select(self) -> None:
        """Until the user picks a node, show the first failure, or the last node once the run is over."""
        run = self.run
        # The innermost first failure: a failed sub-flow's own node has the real traceback. walk() lists a
        # sub-flow's nodes right after it, so its failed descendants follow it in ``failed``.
        failed = [path for path, r in run.walk() if r.status is NodeStatus.FAILED and path in self._paths]
        first_failed = failed[0] if failed else None
        for path in failed[1:]:
            if first_failed is not None and path.startswith(first_failed + "."):
                first_failed = path
        if first_failed is not None:
            self._selected = first_failed
        elif run.status.finished and run.nodes:
            self._selected = next(reversed(run.nodes))

    def _set_selected(self, node: str | None) -> None:
        self._selected = node
        self._setting = True
        try:
            self.selector.value = node
        finally:
            self._setting = False
        self.graph.value = self._graph_html()
        self._refresh_inspector()

    def _on_select(self, change: dict[str, Any]) -> None:
        if self._setting or change["new"] is None:
            return
        self._user_picked = True
        self._set_selected(change["new"])

    def _on_pick(self, change: dict[str, Any]) -> None:
        name = str(change["new"]).split("|", 1)[0]
        if name in self._paths:
            self._user_picked = True
            self._set_selected(name)

    # --- questions of a paused run ------------------------------------------------------------------
    def _update_questions(self) -> None:
        run = self.run
        pending = getattr(run, "pending", None) or {}
        open_ = run.status is RunStatus.PAUSED and bool(pending)
        key = (getattr(run, "pause_version", 0), tuple(pending)) if open_ else ()
        if key == self._questions_key:
            return
        self._questions_key = key
        old = self.questions.children
        self.questions.children = tuple(self._question_box(k, q) for k, q in pending.items()) if open_ else ()
        for box in old:
            box.close()

    def _question_box(self, key: str, question: Any) -> W.Widget:
        redact = self._redact
        text = (
            f'<div class="nbflow-w">{chip("paused", "question")} <b>{esc(question.node)}</b> asks: '
            f"<b>{esc(redact(question.prompt))}</b></div>"
        )
        if question.data is not None:
            text += f'<div class="nbflow-w">{render_value(question.data, redact)}</div>'
        status = W.HTML()
        controls: list[W.Widget] = []
        if question.options:
            for option in question.options:
                button = W.Button(description=str(option), tooltip=f"answer {option!r}")
                button.on_click(lambda _b, value=option: self._answer(key, value, status, controls))
                controls.append(button)
        else:
            box = W.Text(placeholder="your answer")
            send = W.Button(description="Answer", button_style="primary")
            send.on_click(lambda _b: self._answer(key, box.value, status, controls))
            controls += [box, send]
        return W.VBox([W.HTML(text), W.HBox(controls), status], layout=W.Layout(margin="4px 0"))

    def _answer(self, key: str, value: Any, status: W.HTML, controls: list[W.Widget]) -> None:
        """Resume the run with ``value`` for question ``key``: in the background of the running loop."""
        for c in controls:
            c.disabled = True
        status.value = f'<span class="nbflow-muted">resuming with {esc(repr(value))[:100]}…</span>'

        def done(task: Any) -> None:
            exc = None if task.cancelled() else task.exception()
            if exc is not None:  # AnswerError, ResumeConflictError: nothing changed, say why and allow a retry
                status.value = (
                    f'<span class="nbflow-err">{esc(type(exc).__name__)}: {esc(self._redact(str(exc)))}</span>'
                )
                for c in controls:
                    c.disabled = False

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop here (a script): resume blocking
            try:
                self.run.resume(value, question=key)
            except NbflowError as exc:
                status.value = (
                    f'<span class="nbflow-err">{esc(type(exc).__name__)}: {esc(self._redact(str(exc)))}</span>'
                )
                for c in controls:
                    c.disabled = False
            return
        self._answer_task = loop.create_task(self.run.aresume(value, question=key))
        self._answer_task.add_done_callback(done)

    def _cancel(self, _button: Any = None) -> None:
        if self.handle is None or self.run.status.finished:
            return
        self.cancel_button.disabled = True
        self.cancel_button.description = "Cancelling…"
        self.handle.cancel()

    # --- the inspector ---------------------------------------------------------------------------
    def _record(self, path: str) -> NodeRecord | None:
        """The record of ``path`` (``"sub.node"`` inside a sub-flow), or None when it has none (yet)."""
        if "." not in path:
            return self.run.nodes.get(path)
        try:
            return self.run.record(path)
        except (NbflowError, LookupError):
            return None

    def _refresh_inspector(self) -> None:
        name = self._selected
        rec = self._record(name) if name is not None else None
        key = (name, rec.status if rec else None, len(rec.attempts) if rec else 0)
        if key == self._inspected:
            return
        self._inspected = key
        try:
            body = self._inspector_html(name, rec)
        except Exception as exc:  # an output whose repr raises must not stop the live view
            body = f'<div class="nbflow-err">cannot show node {esc(name)}: {esc(type(exc).__name__)}: {esc(exc)}</div>'
        self.inspector.value = body

    def _items_html(self, rec: NodeRecord) -> str:
        """The items of a map node or the iterations of a loop node: index, state, time, output or error."""
        items = getattr(rec, "items", None)
        passes = getattr(rec, "iterations", None)
        rows_of = items if items else passes
        if not rows_of:
            return ""
        redact = self._redact
        what = "items" if items else "iterations"
        failed = [r for r in rows_of if r.error is not None]
        rows = []
        for r in rows_of[:_MAX_ROWS]:
            status = getattr(r, "status", None)
            state = chip(status.value) if status is not None else chip("failed" if r.error is not None else "succeeded")
            if r.error is not None:
                what_out = (
                    f'<span class="nbflow-err">{esc(redact(f"{type(r.error).__name__}: {r.error}")[:200])}</span>'
                )
            else:
                what_out = short_value(str(r.index), r.output, redact) if r.output is not MISSING else ""
            took = "" if r.duration is None else f"{r.duration:.3f}s"
            rows.append(f"<tr><td>{r.index}</td><td>{state}</td><td>{took}</td><td>{what_out}</td></tr>")
        more = (
            f'<div class="nbflow-muted">… {len(rows_of) - _MAX_ROWS:,} more {what}</div>'
            if len(rows_of) > _MAX_ROWS
            else ""
        )
        first_tb = next((getattr(r, "traceback", None) for r in failed if getattr(r, "traceback", None)), None)
        tb = ""
        if first_tb:
            tb = f"<details><summary>traceback of {what[:-1]} {failed[0].index}</summary><pre>{esc(redact(first_tb))}</pre></details>"
        return (
            f"<div><b>{what}</b> ({len(rows_of)}, {len(failed)} failed)</div>"
            f'<div class="nbflow-scroll"><table><tr><th>#</th><th>state</th><th>took</th><th>output / error</th></tr>'
            f"{''.join(rows)}</table></div>{more}{tb}"
        )

    def _inspector_html(self, name: str | None, rec: NodeRecord | None) -> str:
        if name is None:
            return '<div class="nbflow-w nbflow-muted">Choose a node above (or click it in the graph) to see its output.</div>'
        parts = [f"<h4 style='margin:6px 0'>{esc(name)} &nbsp;"]
        g = self._paths[name]
        if rec is None:
            parts.append('<span class="nbflow-muted">not part of this run</span></h4>')
            return f'<div class="nbflow-w">{"".join(parts)}</div>'
        parts.append(chip(rec.status.value))
        if rec.duration is not None:
            parts.append(f' <span class="nbflow-muted">{rec.duration:.3f}s</span>')
        parts.append("</h4>")
        doc = g.spec.doc.strip()
        if doc:
            parts.append(f'<div class="nbflow-muted">{esc(doc.splitlines()[0])}</div>')
        redact = self._redact
        self._redact.collect({k: v for k, v in rec.inputs.items()})
        if rec.status is NodeStatus.FAILED:
            parts.append(f'<div class="nbflow-err"><b>{esc(redact(f"{rec.error_type}: {rec.error}"))}</b></div>')
            if rec.traceback:
                parts.append(f"<pre>{esc(redact(rec.traceback))}</pre>")
        elif rec.status in (NodeStatus.SKIPPED, NodeStatus.CANCELLED):
            parts.append(f"<div>{esc(rec.status.value)}: {esc(redact(rec.skip_reason or ''))}</div>")
        elif rec.status is NodeStatus.PENDING:
            prefix = name.rpartition(".")[0]
            upstream = [f"{prefix}.{u}" if prefix else u for u in g.upstream]
            waiting = [u for u in upstream if (r := self._record(u)) is not None and not r.status.finished]
            why = f"waiting for {', '.join(waiting)}" if waiting else "waiting to start"
            parts.append(f'<div class="nbflow-muted">not started: {esc(why)}</div>')
        elif rec.status is NodeStatus.RUNNING:
            parts.append('<div class="nbflow-muted">running…</div>')
        if rec.status is NodeStatus.SUCCEEDED:
            note = " (overridden: injected, not run)" if rec.overridden else ""
            parts.append(f"<div><b>output</b>{esc(note)}</div>{render_value(rec.output, redact)}")
        parts.append(self._items_html(rec))
        if rec.attempts:
            t0 = self.run.started_at or rec.attempts[0].started_at
            rows = "".join(
                f"<tr><td>{a.number}</td><td>+{a.started_at - t0:.3f}s</td>"
                f"<td>{'' if a.duration is None else f'{a.duration:.3f}s'}</td>"
                f"<td>{'' if a.error is None else esc(redact(f'{type(a.error).__name__}: {a.error}'))[:200]}</td></tr>"
                for a in rec.attempts
            )
            parts.append(
                "<div><b>attempts</b></div><table><tr><th>#</th><th>started</th><th>took</th><th>error</th></tr>"
                f"{rows}</table>"
            )
        if rec.inputs:
            rows = "".join(
                f"<tr><td>{esc(k)}</td><td>{short_value(k, v, redact)}</td></tr>" for k, v in rec.inputs.items()
            )
            parts.append(f"<div><b>inputs</b></div><table>{rows}</table>")
        return f'<div class="nbflow-w">{"".join(parts)}</div>'


def _elapsed(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"
