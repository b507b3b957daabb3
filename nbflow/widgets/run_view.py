"""``RunView``: the live view of one run, an anywidget custom widget (ES module front end, no build step).

How it talks to the browser (and why): the kernel sets a few small traits — ``nodes`` (each node's state,
note and tooltip), ``header``, ``problems``, ``inspector`` (the selected node only), ``selected``,
``questions`` — and the browser recolours the graph it received once (``svg``, laid out by Graphviz once
per graph). Every user action (a click on a node, a pick in the selector, Cancel, an answer) travels as a
*custom message* (``model.send`` in ``run_view.js`` -> ``_on_msg`` here). Custom messages are not held back
by ipywidgets' per-model update throttle, which waits for a kernel ``idle`` that ipykernel never sends for
messages handled while an async cell (``await flow.arun(...)``) holds the shell: with state sync only the
first click of a view was ever handled there (measured with ipykernel 7.4 and ipywidgets 8.1).

Redraws are coalesced to one per ``nbflow.config.redraw_interval``; the final state is always drawn.
Events arrive on the loop that executes the run: the kernel's for ``await flow.arun``/``flow.start``, a
worker thread's for a blocking ``flow.run`` (updates still reach the browser; clicks are handled once the
cell finishes).

Memory: a view keeps its run alive only while the run is live. Once the run is final the view holds it
weakly: ``del run`` frees the run's outputs, and the view keeps showing its final picture (the inspector
then says the run is gone). The laid-out SVG is shared by every view of the same graph.

Saved notebooks: ``show()`` displays a static HTML snapshot (coloured SVG, problems, outputs summary)
next to the widget and updates it when the run ends, so nbconvert, GitHub, nbviewer and a notebook
reopened without a kernel show the run. The live widget hides the snapshot while it is rendered.
"""

from __future__ import annotations

import asyncio
import base64
import secrets as _random
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anywidget
import ipywidgets
import traitlets as t

from nbflow._core.config import config
from nbflow._core.errors import NbflowError, NbflowWarning, UnknownNodeError
from nbflow._core.events import Event, RunFinished, RunPaused
from nbflow._core.missing import MISSING
from nbflow._core.states import NodeStatus, RunStatus
from nbflow._engine.kernel import RunHandle
from nbflow.widgets.graph_pane import (
    NodeLook,
    SvgTemplate,
    escaped_paths,
    first_doc_lines,
    initial_collapse,
    looks,
    path_index,
    subflow_paths,
    table_html,
    tries,
    visible_nodes,
)
from nbflow.widgets.redact import Redactor, is_secret_name
from nbflow.widgets.render import describe, render_value, short_value
from nbflow.widgets.style import SYMBOLS, badge, chip, chips, esc
from nbflow.widgets.throttle import Later, Throttle, call_later
from nbflow.widgets.tracebacks import traceback_html
from nbflow.widgets.transcript import stream_html, transcript_html

if TYPE_CHECKING:
    from nbflow._graph.graph import Graph
    from nbflow._record.run import NodeColumns, NodeRecord, Run

__all__ = ["RunView"]

MAX_SVG_NODES = 150  # above this the graph is shown as a table: a picture that big is unreadable and slow to lay out
_MAX_LISTED = 8  # errors / skip groups listed at the top before "and N more"
_PASSED_OVER = frozenset({NodeStatus.SKIPPED, NodeStatus.CANCELLED})  # what the problems list groups by reason
_MAX_ROWS = 100  # map items / loop iterations listed in the inspector
# The snapshot's table lists every node of a run this big (every run drawn as a picture); a bigger run's table
# lists the first nodes in plan order, then only the nodes in _ALWAYS_LISTED, then one line counting the rest.
SNAPSHOT_ROWS = MAX_SVG_NODES
_BRANCH_LEGEND = (
    '<div class="nbflow-snap-legend" style="font-size:12px;margin:2px 0;color:#343a40">'
    '<span style="color:#5f3dc4;font-weight:600">━━ branch taken</span> &nbsp; '
    "<span>╌╌ branch not taken (skipped)</span></div>"
)
_ALWAYS_LISTED = frozenset({NodeStatus.FAILED, NodeStatus.CANCELLED, NodeStatus.PAUSED, NodeStatus.RUNNING})
_NO_TEXT = (int, float, complex, type(None))  # values that never carry a secret's text (bool is an int)
_HERE = Path(__file__).parent
_ESM = (_HERE / "run_view.js").read_text(encoding="utf-8")
_CSS = (_HERE / "run_view.css").read_text(encoding="utf-8")
_GONE = (
    '<div class="nbflow-w nbflow-muted">This run is no longer in the kernel\'s memory (it was deleted or '
    "replaced), so its outputs cannot be shown; the graph keeps its final state.</div>"
)


class RunView(anywidget.AnyWidget):
    """The live view of a Run (or of the RunHandle of ``flow.start``).

    Traits (read-only, what the browser shows): ``header``, ``problems`` (failures at the top; skipped
    or cancelled nodes and why, except branches not taken), ``svg`` (the graph, laid out once) or
    ``table`` (big graphs), ``nodes`` (path -> [state, note, tooltip]), ``options`` (the selector),
    ``selected`` and ``inspector`` (the chosen node's output, error and traceback, attempts, inputs,
    answered questions), ``questions`` (a paused run's open questions) and ``cancellable``.
    ``select(name)`` chooses a node; ``graph_html()`` and ``snapshot_html()`` give the static pictures.
    Values of secret-named inputs are masked (see ``nbflow.widgets.redact``).
    """

    # Defined here (not added per instance by AnyWidget.__init__, which makes a new class per view).
    _esm = t.Unicode(_ESM).tag(sync=True)
    _css = t.Unicode(_CSS).tag(sync=True)
    _anywidget_id = t.Unicode("nbflow.widgets.run_view.RunView").tag(sync=True)

    svg = t.Unicode("").tag(sync=True)
    table = t.Unicode("").tag(sync=True)
    nodes = t.Dict().tag(sync=True)  # in full once (the opening message); then per-node deltas (_send_nodes)
    nodes_seq = t.Int(0).tag(sync=True)  # the number of the last delta folded into ``nodes``
    header = t.Unicode("").tag(sync=True)
    problems = t.Unicode("").tag(sync=True)
    inspector = t.Unicode("").tag(sync=True)
    selected = t.Unicode("").tag(sync=True)
    # every node's path, for the selector (sent once, as one line each: a list of 1,000 paths cost ipywidgets
    # ~0.35 ms to look through for binary buffers and ~0.08 ms of JSON; paths are identifiers joined by ".")
    options: t.List[Any] = t.List().tag(sync=True, to_json=lambda paths, _widget: "\n".join(paths))
    questions: t.List[Any] = t.List().tag(sync=True)
    answer_status = t.Dict().tag(sync=True)
    message_error = t.Unicode("").tag(sync=True)  # why the last message from the browser was refused ("": none)
    cancellable = t.Bool(False).tag(sync=True)
    cancelling = t.Bool(False).tag(sync=True)
    status = t.Unicode("").tag(sync=True)
    snapshot_id = t.Unicode("").tag(sync=True)
    timeline = t.Dict().tag(sync=True)

    symbols = t.Dict().tag(sync=True)  # state -> symbol, for the selector's labels (sent once)
    subflows: t.List[Any] = t.List().tag(sync=True)  # the paths of the sub-flow nodes (foldable)
    collapsed: t.List[Any] = t.List().tag(sync=True)  # the sub-flows drawn as one node each

    _node_deltas = False  # True once the widget is open (set at the end of __init__)
    _final_sent = False  # the final node states went out whole (see _send_nodes)

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
        self._run: Run | None = run  # strong while the run is live
        self._run_ref: weakref.ref[Run] = weakref.ref(run)
        self._flow_name = run.flow
        self._run_id = run.run_id
        self.handle: RunHandle | None = handle
        self._graph: Graph = graph
        self._paths = path_index(graph)  # "node", and "subflow.node" for nodes of sub-flows
        self._later = later
        self._redact = Redactor()
        self._redact.collect(run.inputs)
        self._user_picked = False
        self._inspected: tuple[Any, ...] | None = None
        self._ticking = False
        self._closed = False
        self._template: SvgTemplate | None = None
        self._docs: dict[str, str] = {}
        self._history: dict[str, list[str]] = {}  # node -> answered questions ("answered 'approve' ...")
        self._answer_task: Any = None
        self._snapshots: list[Any] = []  # the DisplayHandles of the static snapshots shown (one per display)
        self._final_drawn = False
        self._max_svg_nodes = max_svg_nodes
        folded = initial_collapse(graph, max_svg_nodes)
        if folded is not None:
            try:
                self._template = SvgTemplate.layout(graph, folded)
                self._docs = first_doc_lines(graph)
            except Exception as exc:  # a broken Graphviz must not break the view: fall back to the table
                self._template = None
                warnings.warn(
                    f"drawing the graph of flow {graph.name!r} failed ({type(exc).__name__}: {exc}); "
                    f"showing it as a table",
                    NbflowWarning,
                    stacklevel=2,
                )
        self._live_labels = self._template is not None
        # Not AnyWidget.__init__: it adds its traits per instance (a new class per view); ours are declared.
        # What is known now goes out with the widget's opening message (the SVG once, never again).
        ipywidgets.DOMWidget.__init__(
            self,
            snapshot_id=_random.token_hex(6),
            svg=self._template.blank if self._template is not None else "",
            # every node's state goes out with the opening message; then only what changes (_send_nodes)
            nodes=self._node_states(run) if self._template is not None else {},
            # the selector's entries, once: with a picture the browser labels them from the node states
            # ("✗ report — failed"), so a redraw does not send every label again
            options=list(self._paths),
            symbols=SYMBOLS if self._live_labels else {},
            cancellable=handle is not None and not run.status.finished,
            status=run.status.value,
            subflows=subflow_paths(graph) if self._template is not None else [],
            collapsed=sorted(folded) if self._template is not None and folded else [],
            # with the opening message too, not an update each right after it (~0.1 ms each)
            _dom_classes=("nbflow-runview",),
            header=self._header_html(run) if run.status is RunStatus.PENDING else "",
        )
        self.on_msg(self._on_msg)

        self.redraws = 0
        self._throttle = Throttle(
            self._redraw, config.redraw_interval if interval is None else interval, clock=clock, later=later
        )
        self._unsubscribe: Callable[[], None] | None = None
        if run.status is not RunStatus.PENDING:  # (a pending run: only the header, sent above; the first
            with self.hold_sync():  # event's poke draws the rest within one interval)
                self._redraw()
        if not run.status.finished:
            # watched, not subscribed: node changes come as coalesced notices, no event is built (Run._watch)
            self._unsubscribe = run._watch(self._on_event)
            if run.status.finished:  # it ended (in another thread) between the check and subscribing
                self._on_event(RunFinished(run_id=run.run_id, time=time.time(), status=run.status, duration=0.0))
            elif run.status is RunStatus.RUNNING:  # shown mid-run: keep the elapsed time moving
                self._ticking = True
                self._later(1.0, self._tick)
        else:
            self._let_go()
        self._node_deltas = True  # from now on node states go out as per-node deltas

    # --- public ----------------------------------------------------------------------------------
    @property
    def run(self) -> Run | None:
        """The run shown; None once a final run was deleted (the view then keeps only its picture)."""
        return self._run if self._run is not None else self._run_ref()

    def select(self, node: str) -> None:
        """Show ``node`` in the inspector (as if the user picked it)."""
        if node not in self._paths:
            raise UnknownNodeError(node, self._paths)
        self._user_picked = True
        self._set_selected(node)

    def show(self) -> None:
        """Display the widget, with the static snapshot beside it (what a saved notebook shows)."""
        from IPython.display import display

        display(self)  # _repr_mimebundle_ puts the snapshot out first

    def fold(self, subflow: str, folded: bool = True) -> None:
        """Draw sub-flow ``subflow`` as one node (``folded``) or open it to show its nodes.

        Opening is refused (the picture stays) when it would show more than ``max_svg_nodes`` nodes.
        """
        if subflow not in self.subflows:
            if subflow not in self._paths:
                raise UnknownNodeError(subflow, self._paths)
            raise NbflowError(
                f"node {subflow!r} of flow {self._flow_name!r} is not a sub-flow, so it cannot be folded; "
                f"sub-flows: {', '.join(self.subflows) or '(none)'}"
            )
        now = frozenset(self.collapsed)
        want = now | {subflow} if folded else now - {subflow}
        if want == now or (not folded and visible_nodes(self._graph, want) > self._max_svg_nodes):
            return
        self._relayout(want)

    def _reveal(self, path: str) -> None:
        """Open the folded sub-flows around ``path`` (a node picked in the selector or the problems)."""
        parts = path.split(".")
        outer = {".".join(parts[:i]) for i in range(1, len(parts))}
        want = frozenset(self.collapsed) - outer
        if want != frozenset(self.collapsed) and visible_nodes(self._graph, want) <= self._max_svg_nodes:
            self._relayout(want)

    def _relayout(self, collapsed: frozenset[str]) -> None:
        try:
            template = SvgTemplate.layout(self._graph, collapsed)
        except Exception as exc:  # a broken Graphviz: keep the picture there is
            warnings.warn(f"drawing the graph of flow {self._flow_name!r} failed: {exc}", NbflowWarning, stacklevel=3)
            return
        self._template = template
        with self.hold_sync():
            self.collapsed = sorted(collapsed)
            self.svg = template.blank  # the browser recolours it from the node states it has

    def close(self) -> None:
        """Stop following the run and close the widget."""
        self._closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._throttle.cancel()
        self._run = None
        self.handle = None
        layout = getattr(self, "layout", None)  # DOMWidget's own Layout widget: a comm of its own, left open else
        super().close()
        if layout is not None:
            layout.close()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        if self.comm is None:  # closed: nothing live to show
            return {"text/plain": self._text()}
        self._show_snapshot()
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            # What text-only front ends and nbval see: stable (no run id, no timing).
            data["text/plain"] = self._text()
        return data

    # --- node states: per-node deltas ------------------------------------------------------------
    def _should_send_property(self, key: str, value: Any) -> bool:
        if key in ("nodes", "nodes_seq") and self._node_deltas:
            return False  # sent by _send_nodes: only the nodes that changed
        return bool(super()._should_send_property(key, value))

    def _send_nodes(self, new: dict[str, list[str]], final: bool = False) -> None:
        """Send only the nodes whose state changed, numbered: ``{"kind": "nodes", "seq": n, "delta": {...}}``.

        The browser folds each delta into its copy; a gap in the numbers (deltas sent before the browser's
        model listened) makes it ask for the whole state once (``resync``). The traits keep the whole
        state: a page reloaded while the kernel lives gets it with the model's state. The ``final`` state
        (a finished or paused run) goes out whole, once, as a state update: the browser's model has it
        however late its front end loaded, and so has the widget state a notebook saves (nbconvert and
        nbclient record state updates, not custom messages).
        """
        old = self.nodes
        delta = {path: look for path, look in new.items() if old.get(path) != look}
        if delta:
            self.nodes = new
            self.nodes_seq += 1
        if not self._node_deltas:
            return
        if final:
            if delta or not self._final_sent:
                self.send_state(["nodes", "nodes_seq"])
                self._final_sent = True
        elif delta:
            self.send({"kind": "nodes", "seq": self.nodes_seq, "delta": delta})
            self._final_sent = False  # a resumed run: its end goes out whole again

    def _node_states(self, run: Run) -> dict[str, list[str]]:
        return {
            path: _look_state(look) for path, look in looks(self._graph, run, None, self._redact, self._docs).items()
        }

    def _resync(self, seq: Any) -> None:
        if seq != self.nodes_seq:
            self.send({"kind": "nodes", "seq": self.nodes_seq, "full": self.nodes})

    def _show_snapshot(self) -> None:
        """Every display of the view puts the static snapshot out first, as an output of its own.

        A saved notebook, nbconvert, GitHub and nbviewer show it; the live widget hides it while rendered,
        and the snapshot hides the widget's "model not found" line when the notebook is reopened without
        the kernel that made it. Each snapshot is updated to the final state when the run ends.
        """
        from IPython.display import display

        handle = display(self._snapshot_bundle(), raw=True, display_id=True)
        if handle is not None:
            self._snapshots.append(handle)

    def set_state(self, sync_data: Any) -> None:
        """The browser owns no state: its actions arrive as messages (``_on_msg``), so state it sends is ignored."""
        return

    def _text(self) -> str:
        n = len(self._graph.nodes)
        return f"<nbflow run view: flow {self._flow_name!r}, {n} node{'s' if n != 1 else ''}>"

    # --- messages from the browser -------------------------------------------------------------------
    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """A message from the browser (or anything that speaks the comm protocol): checked whole before anything
        acts on it; a malformed one changes nothing and sets ``message_error``, which the view shows. Nothing
        raised here reaches the cell."""
        try:
            why = self._refusal(content)
            if why is None:
                self._handle(content)
        except Exception as exc:  # a bug in handling a valid message: said in the view, not as a cell traceback
            why = f"{type(exc).__name__}: {exc}"
        self.message_error = self._redact(why)[:300] if why else ""

    def _refusal(self, content: Any) -> str | None:
        """Why ``content`` is not a message this view acts on, or None."""
        if not isinstance(content, dict):
            return f"refused a message that is not an object: {type(content).__name__}"
        kind = content.get("kind")
        if kind in ("cancel", "timeline"):
            return None
        if kind == "resync":
            seq = content.get("seq")
            ok = seq is None or (isinstance(seq, int) and not isinstance(seq, bool))
            return None if ok else f"refused resync: seq {seq!r} is not a number"
        if kind == "select":
            node = content.get("node")
            return None if isinstance(node, str) and node in self._paths else f"refused select: no node {node!r}"
        if kind == "fold":
            node, folded = content.get("node"), content.get("folded", True)
            if not isinstance(node, str) or node not in self.subflows:
                return f"refused fold: {node!r} is not a sub-flow of this view"
            return None if isinstance(folded, bool) else f"refused fold: folded={folded!r} is not true or false"
        if kind == "answer":
            return self._answer_refusal(content)
        return f"refused a message of unknown kind {kind!r}"

    def _answer_refusal(self, content: dict[str, Any]) -> str | None:
        key, value = content.get("key"), content.get("value")
        pending = getattr(self.run, "pending", None) or {}
        if not isinstance(key, str) or key not in pending:
            return f"refused answer: no open question {key!r}"
        for name in ("comment", "how"):
            if not isinstance(content.get(name, ""), str | None):
                return f"refused answer: {name} is not text"
        question = pending[key]
        if question.options:
            if not isinstance(value, str | int | float | bool) or value is None:
                return f"refused answer: {type(value).__name__} is not one of the options"
            shown = {self._redact(str(o)) for o in question.options}
            if value not in question.options and value not in shown:
                return f"refused answer: {value!r} is not one of the options"
        return None

    def _handle(self, content: dict[str, Any]) -> None:
        kind = content["kind"]
        if kind == "select":
            node = content["node"]
            self._user_picked = True
            if self._template is not None:
                self._reveal(node)
            self._set_selected(node)
        elif kind == "cancel":
            self._cancel()
        elif kind == "answer":
            self._answer(
                content["key"], content.get("value"), str(content.get("comment") or ""), str(content.get("how") or "")
            )
        elif kind == "timeline":
            self._update_timeline()
        elif kind == "fold":
            self.fold(content["node"], content.get("folded", True))
        elif kind == "resync":
            self._resync(content.get("seq"))

    # --- events ----------------------------------------------------------------------------------
    def _on_event(self, event: Event | None) -> None:
        """A run event, or None: node states changed (a coalesced notice, see ``Run._watch``)."""
        if self._closed:
            return
        if isinstance(event, RunFinished):
            self._throttle.cancel()
            if self._unsubscribe is not None:
                self._unsubscribe()
                self._unsubscribe = None
            self._throttle.flush()
            self._let_go()
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

    def _let_go(self) -> None:
        """The run is final: hold it weakly (``del run`` frees it) and forget the handle."""
        run = self.run
        if run is not None and run.status.finished:
            self._run = None
            self.handle = None

    def _tick(self) -> None:
        run = self.run
        if self._closed or run is None or run.status is not RunStatus.RUNNING:
            self._ticking = False
            return
        self.header = self._header_html(run)
        self._later(1.0, self._tick)

    # --- drawing ---------------------------------------------------------------------------------
    def _redraw(self) -> None:
        run = self.run
        if run is None:
            return
        if self._unsubscribe is not None:
            run._arm()  # before reading the records: a change from now on notices this view again
        self.redraws += 1
        # Every node's state straight from the run's columns (sub-flows' under their paths), no record
        # made: on a 1,000-node run making every record cost ~1 ms of the last redraw's ~3.5. Records are
        # made only for what is shown: the failed nodes (rare), the table's rows, the selected node.
        columns = list(run._column_walk())
        by_path = _states_by_path(columns)
        states = set(by_path.values())  # (most redraws have no failed/skipped/cancelled node)
        failed = (
            [(path, r) for path, r in run.walk() if r.status is NodeStatus.FAILED and path in self._paths]
            if NodeStatus.FAILED in states
            else []
        )
        final = run.status.finished or run.status is RunStatus.PAUSED
        if final:
            self._collect_secrets(
                run, columns
            )  # secrets fed between nodes are redacted in tooltips and the snapshot too
        with self.hold_sync():
            if not self._user_picked:
                self._auto_select(run, failed)
            self.status = run.status.value
            self.header = self._header_html(run)
            self.problems = self._problems_html(run, failed, bool(states & _PASSED_OVER))
            if self._template is not None:
                self._send_nodes(self._node_states(run), final)
            else:
                self.table = table_html(self._paths, self._record, self.selected or None, self._redact, states=by_path)
            if run.status.finished:
                self.cancellable = False
            self._update_questions(run)
            self._refresh_inspector()
        if final and self._snapshots:
            bundle = self._snapshot_bundle()
            for handle in self._snapshots:
                try:
                    handle.update(bundle, raw=True)
                except Exception:  # the display went away (no kernel): the live view still works
                    pass

    def _collect_secrets(self, run: Run, columns: list[tuple[str, NodeColumns]] | None = None) -> None:
        """Remember the values of every secret-named input of every node (to redact them wherever they appear)."""
        collect = self._redact.collect
        for _prefix, c in run._column_walk() if columns is None else columns:
            if _holds_no_secret(c.inputs):
                continue
            for inputs in c.inputs:
                if not inputs:
                    continue
                # numbers, booleans and None hold no text to redact: skip them before the name checks (~90%
                # of this cost on a 1,000-node run of numbers); most records hold nothing else, so look first
                for v in inputs.values():
                    if not isinstance(v, _NO_TEXT):
                        collect({k: v for k, v in inputs.items() if not isinstance(v, _NO_TEXT)})
                        break

    def _header_html(self, run: Run) -> str:
        elapsed = run.duration
        when = _elapsed(elapsed) if elapsed is not None else "not started"
        total = len(run.nodes)
        why = getattr(run, "reason", None)  # e.g. the run's deadline passed
        reason = f'<div class="nbflow-muted">{esc(self._redact(why))}</div>' if why else ""
        counts = run.counts()
        if run.status is RunStatus.SUCCEEDED or run.status is RunStatus.RUNNING:
            done = sum(n for state, n in counts.items() if NodeStatus(state).finished)  # one pass over the nodes
            progress = f" · {done}/{total} done"
        else:  # a cancelled or failed run is not "5/5 done": the chips say what happened
            progress = f" · {total} node{'s' if total != 1 else ''}"
        return (
            f'<div class="nbflow-w">{badge(run.status)} <b>{esc(run.flow)}</b> '
            f'<span class="nbflow-muted">run {esc(run.run_id)} · {when}{progress}</span> '
            f"&nbsp;{chips(counts)}{reason}</div>"
        )

    def _problems_html(self, run: Run, failed: list[tuple[str, NodeRecord]], passed_over: bool = True) -> str:
        """Failed nodes (name and exception type: the message is shown once, in the inspector), then
        cancelled or skipped nodes and why. Branches not taken are not problems and are not listed.

        ``failed``: the failed records shown (path, record), in the run's order (``_redraw`` finds them);
        ``passed_over``: False when no node is skipped or cancelled (nothing more to look for)."""
        lines: list[str] = []
        for path, rec in failed[:_MAX_LISTED]:
            first = (self._redact(str(rec.error or "")).splitlines() or [""])[0]
            lines.append(
                f'<div class="nbflow-err nbflow-problem" data-node="{esc(path)}">{chip("failed", path)} '
                f"<b>{esc(rec.error_type or 'error')}</b>"
                f'<span class="nbflow-muted"> {esc(first[:120])}{"…" if len(first) > 120 else ""}</span></div>'
            )
        if len(failed) > _MAX_LISTED:
            lines.append(f'<div class="nbflow-err">… and {len(failed) - _MAX_LISTED} more failed nodes</div>')
        groups: dict[tuple[str, str], list[str]] = {}
        if passed_over:  # the run's own nodes' states from its columns: a record only for those passed over
            _, c = next(run._column_walk())
            for name, state in zip(c.names, c.status, strict=False):  # (see _states_by_path)
                if state in _PASSED_OVER:
                    reason = run.nodes[name].skip_reason or ""
                    if state is NodeStatus.SKIPPED and _not_taken(reason):
                        continue
                    groups.setdefault((state.value, reason), []).append(name)
        for (status, reason), names in list(groups.items())[:_MAX_LISTED]:
            shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
            lines.append(
                f"<div>{chip(status, f'{len(names)} {status}')} {esc(shown)}"
                f'<span class="nbflow-muted"> — {esc(self._redact(reason))}</span></div>'
            )
        return f'<div class="nbflow-w">{"".join(lines)}</div>' if lines else ""

    def graph_html(self) -> str:
        """The graph as static HTML coloured by the current state (the snapshot's picture)."""
        run = self.run
        if self._template is not None:
            if run is not None:
                node_looks = looks(self._graph, run, self.selected or None, self._redact, self._docs)
            else:
                node_looks = {p: _unlook(p, v) for p, v in self.nodes.items()}
            return self._template.render(node_looks)
        if self.table or run is None:
            return self.table
        states = _states_by_path(list(run._column_walk()))  # (no record made for the order)
        return table_html(self._paths, self._record, self.selected or None, self._redact, states=states)

    def _auto_select(self, run: Run, failed_records: list[tuple[str, NodeRecord]]) -> None:
        """Until the user picks a node, show the first failure, or the last node once the run is over."""
        failed = [path for path, _ in failed_records]
        first_failed = failed[0] if failed else None
        for path in failed[1:]:
            if first_failed is not None and path.startswith(first_failed + "."):
                first_failed = path
        if first_failed is not None:
            self.selected = first_failed
        elif run.status is RunStatus.PAUSED and run.pending:
            self.selected = next(iter(run.pending.values())).node
        elif run.status.finished and run.nodes:
            self.selected = next(reversed(run.nodes))

    def _set_selected(self, node: str) -> None:
        with self.hold_sync():
            self.selected = node
            if self._template is None:
                run = self.run
                if run is not None:
                    self.table = table_html(self._paths, self._record, node, self._redact)
            self._refresh_inspector()

    # --- questions of a paused run ------------------------------------------------------------------
    def _update_questions(self, run: Run) -> None:
        pending = getattr(run, "pending", None) or {}
        open_ = run.status is RunStatus.PAUSED and bool(pending)
        if not open_:
            if self.questions:
                self.questions = []
            return
        version = getattr(run, "pause_version", 0)
        redact = self._redact
        cards = []
        for key, q in pending.items():
            data = ""
            if q.data is not None:
                try:
                    data = render_value(q.data, redact)
                except Exception as exc:
                    data = f'<div class="nbflow-err">cannot show the data: {esc(type(exc).__name__)}</div>'
            cards.append(
                {
                    "key": key,
                    "node": q.node,
                    "prompt": redact(q.prompt),
                    "data": data,
                    "options": [redact(str(o)) for o in q.options] if q.options else [],
                    "version": version,
                    "asked": datetime.fromtimestamp(q.asked_at).strftime("%H:%M:%S"),
                }
            )
        if cards != self.questions:
            self.questions = cards

    def _answer(self, key: str, value: Any, comment: str, how: str) -> None:
        """Resume the run with ``value`` for question ``key``: in the background of the running loop."""
        run = self.run
        if run is None:
            return
        question = (getattr(run, "pending", None) or {}).get(key)
        if question is not None and question.options and value not in question.options:
            # the browser was sent the options redacted: a click sends back the redacted text
            shown = {self._redact(str(o)): o for o in question.options}
            if value not in shown:
                self.answer_status = {**self.answer_status, key: f"unknown option {self._redact(repr(value))}"}
                return
            value = shown[value]
        self.answer_status = {**self.answer_status, key: f"resuming with {self._redact(repr(value))[:100]}…"}
        when = datetime.now().strftime("%H:%M:%S")
        node = question.node if question is not None else key.split("#")[0]
        prompt = question.prompt if question is not None else key
        note = f"answered {value!r} by {how or 'the view'} at {when} to “{prompt}”"
        if comment:
            note += f" — comment: {comment}"
        entry = self._redact(note)

        def failed(exc: BaseException) -> None:
            # AnswerError, ResumeConflictError: nothing changed, say why and allow a retry
            if entry in self._history.get(node, []):
                self._history[node].remove(entry)
            self.answer_status = {**self.answer_status, key: f"{type(exc).__name__}: {self._redact(str(exc))}"}

        def done(task: Any) -> None:
            exc = None if task.cancelled() else task.exception()
            if exc is not None:
                failed(exc)
            else:
                self.answer_status = {k: v for k, v in self.answer_status.items() if k != key}

        # Kept in the node's history before resuming: the resumed run may finish (and redraw) at once.
        self._history.setdefault(node, []).append(entry)
        self._inspected = None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop here (a script): resume blocking
            try:
                run.resume(value, question=key)
            except NbflowError as exc:
                failed(exc)
                return
            self.answer_status = {k: v for k, v in self.answer_status.items() if k != key}
            return
        self._answer_task = loop.create_task(run.aresume(value, question=key))
        self._answer_task.add_done_callback(done)

    def _cancel(self) -> None:
        run = self.run
        if self.handle is None or run is None or run.status.finished:
            return
        self.cancelling = True
        self.handle.cancel()

    # --- the timeline ---------------------------------------------------------------------------
    def _update_timeline(self) -> None:
        """Bars of every node's attempts, the waits between them and pauses (sent when the tab is opened)."""
        run = self.run
        if run is None:
            return
        t0 = run.started_at or time.time()
        rows = []
        for path, rec in run.walk():
            if path not in self._paths:
                continue
            bars = []
            for a in getattr(rec, "attempts", ()):
                end = a.finished_at if a.finished_at is not None else time.time()
                kind = "failed" if a.error is not None else "ran"
                bars.append([round(a.started_at - t0, 4), round(end - t0, 4), kind])
                if a.delay:
                    bars.append([round(end - t0, 4), round(end - t0 + a.delay, 4), "wait"])
            rows.append({"node": path, "state": rec.status.value, "bars": bars})
        end = (run.finished_at or time.time()) - t0 if run.started_at else 0.0
        self.timeline = {"rows": rows, "end": round(end, 4)}

    # --- the inspector ---------------------------------------------------------------------------
    def _record(self, path: str) -> NodeRecord | None:
        """The record of ``path`` (``"sub.node"`` inside a sub-flow), or None when it has none (yet)."""
        run = self.run
        if run is None:
            return None
        if "." not in path:
            return run.nodes.get(path)
        try:
            return run.record(path)
        except (NbflowError, LookupError):
            return None

    def _refresh_inspector(self) -> None:
        name = self.selected or None
        run = self.run
        if run is None:
            if self.inspector != _GONE:
                self.inspector = _GONE
            return
        rec = self._record(name) if name is not None else None
        key = (
            name,
            rec.status if rec else None,
            len(rec.attempts) if rec else 0,
            len(self._history.get(name or "", ())),
            _transcript_size(rec),
        )
        if key == self._inspected:
            return
        self._inspected = key
        try:
            body = self._inspector_html(run, name, rec)
        except Exception as exc:  # an output whose repr raises must not stop the live view
            body = f'<div class="nbflow-err">cannot show node {esc(name)}: {esc(type(exc).__name__)}: {esc(exc)}</div>'
        self.inspector = body

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
            tb = (
                f"<details><summary>traceback of {what[:-1]} {failed[0].index}</summary>"
                f"{traceback_html(redact(first_tb))}</details>"
            )
        return (
            f"<div><b>{what}</b> ({len(rows_of)}, {len(failed)} failed)</div>"
            f'<div class="nbflow-scroll" tabindex="0" role="region" aria-label="attempts"><table><tr><th>#</th><th>state</th><th>took</th><th>output / error</th></tr>'
            f"{''.join(rows)}</table></div>{more}{tb}"
        )

    def _inspector_html(self, run: Run, name: str | None, rec: NodeRecord | None) -> str:
        if name is None:
            return '<div class="nbflow-w nbflow-muted">Click a node in the graph (or pick it above) to see its output.</div>'
        parts = [f"<h4 class='nbflow-title'>{esc(name)} &nbsp;"]
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
        self._redact.collect(dict(rec.inputs.items()))
        if rec.status is NodeStatus.FAILED:
            # The message once, its line breaks kept; the traceback without its last line (the message again).
            message = redact(f"{rec.error_type}: {rec.error}")
            parts.append(f'<pre class="nbflow-err nbflow-message">{esc(message)}</pre>')
            if rec.traceback:
                parts.append(
                    "<details open><summary>traceback</summary>"
                    f"{traceback_html(_without_message(redact(rec.traceback), message))}</details>"
                )
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
            if rec.attempts:
                parts.append(stream_html(rec.attempts[-1], redact))
        elif rec.status is NodeStatus.PAUSED:
            parts.append('<div class="nbflow-muted">paused: waiting for an answer (see the question above)</div>')
        history = self._history.get(name)
        if history:
            parts.append('<div><b>questions</b></div><ul class="nbflow-history">')
            parts.extend(f"<li>{esc(h)}</li>" for h in history)
            parts.append("</ul>")
        if rec.status is NodeStatus.SUCCEEDED:
            note = " (overridden: injected, not run)" if rec.overridden else ""
            parts.append(f"<div><b>output</b>{esc(note)}</div>{render_value(rec.output, redact)}")
        parts.append(self._items_html(rec))
        printed = rec.printed
        if printed:  # what the node printed, logged and warned, as a cell shows its output
            parts.append(f'<div><b>printed</b></div><pre class="nbflow-printed">{esc(redact(printed))}</pre>')
        parts.append(transcript_html(rec.attempts, redact))
        if tries(rec) > 1:
            t0 = run.started_at or rec.attempts[0].started_at
            rows = "".join(
                f"<tr><td>{a.number}</td><td>+{a.started_at - t0:.3f}s</td>"
                f"<td>{'' if a.duration is None else f'{a.duration:.3f}s'}</td>"
                f"<td>{'' if a.error is None else esc(redact(f'{type(a.error).__name__}: {a.error}'))[:200]}</td>"
                f"<td>{'' if not a.delay else f'{a.delay:.2f}s'}</td></tr>"
                for a in rec.attempts
            )
            parts.append(
                "<div><b>attempts</b></div><table><tr><th>#</th><th>started</th><th>took</th><th>error</th>"
                f"<th>then waited</th></tr>{rows}</table>"
            )
        if rec.inputs:
            rows = "".join(
                f"<tr><td>{esc(k)}</td><td>{short_value(k, v, redact)}</td></tr>" for k, v in rec.inputs.items()
            )
            parts.append(f"<div><b>inputs</b></div><table>{rows}</table>")
        return f'<div class="nbflow-w">{"".join(parts)}</div>'

    # --- the static snapshot (saved notebooks, nbconvert, GitHub) -------------------------------------
    def snapshot_html(self) -> str:
        """The run as static HTML: header, problems, the coloured graph and a summary of the outputs.

        Inline styles only (HTML sanitizers drop ``<style>``); the live widget hides it while rendered.
        """
        run = self.run
        rows: list[str] = []
        urgent: list[
            str
        ] = []  # failed, paused, cancelled, running nodes: listed above the picture, seen without scrolling
        left_out: dict[str, int] = {}  # state -> nodes not listed (a big run's succeeded, skipped or pending)
        if run is not None:
            self._collect_secrets(run)
            shown = escaped_paths(self._graph)
            redact = self._redact
            for i, (path, status, output, duration, error, skip_reason) in enumerate(_summary_rows(run)):
                if i >= SNAPSHOT_ROWS and status not in _ALWAYS_LISTED:
                    left_out[status.value] = left_out.get(status.value, 0) + 1
                    continue
                if status is NodeStatus.SUCCEEDED and output is not MISSING:
                    what = esc(describe(output)) + " " + short_value(path.rpartition(".")[2], output, redact, 120)
                elif error is not None:
                    what = f'<span style="color:#c92a2a">{esc(redact(f"{type(error).__name__}: {error}")[:300])}</span>'
                else:
                    what = esc(redact(skip_reason or ""))
                took = "" if duration is None else f"{duration:.3f}s"
                (urgent if status in _ALWAYS_LISTED else rows).append(
                    f'<tr><td style="padding:1px 8px">{chip(status.value)}</td><td style="padding:1px 8px"><b>'
                    f'{shown.get(path) or esc(path)}</b></td><td style="padding:1px 8px">{took}</td>'
                    f'<td style="padding:1px 8px">{what}</td></tr>'
                )
        first = (
            f'<table class="nbflow-snap-urgent" style="border-collapse:collapse;font-size:12px;margin:4px 0">'
            f"{''.join(urgent)}</table>"
            if urgent
            else ""
        )
        table = f'<table style="border-collapse:collapse;font-size:12px">{"".join(rows)}</table>' if rows else ""
        if left_out:
            table += _more_nodes_html(left_out)
        if run is not None:
            table += _snapshot_transcripts(run, self._redact)
        picture = self.graph_html()
        legend = ""
        if picture.startswith("<svg"):
            if "nbflow-branch" in picture:
                legend = _BRANCH_LEGEND
            # An <img> of the SVG: notebook viewers sanitise inline <svg> away, a data: image passes. The whole
            # picture shows, scaled down to fit 640 px of height (no scroll box hiding a failed node).
            data = base64.b64encode(picture.encode("utf-8")).decode("ascii")
            picture = (
                f'<img class="nbflow-snap-graph" alt="graph of flow {esc(self._flow_name)}" '
                f'src="data:image/svg+xml;base64,{data}" style="max-width:100%;max-height:640px"/>'
            )
            picture = f"<div>{picture}</div>"
        else:  # the table of nodes (a big graph): its own box, sized to it up to 480 px
            picture = f'<div style="max-height:480px;overflow:auto">{picture}</div>'
        return (
            f'<div class="nbflow-snap nbflow-snap-{self.snapshot_id}" style="font-family:sans-serif;font-size:13px">'
            f"{_hide_dead_widget(self.snapshot_id)}{self.header}{self.problems}{first}"
            f"{picture}{legend}{table}</div>"
        )

    def _snapshot_bundle(self) -> dict[str, Any]:
        n = len(self._graph.nodes)
        return {
            "text/html": self.snapshot_html(),
            # stable (the state changes by an update nbval does not follow): the HTML says the state
            "text/plain": f"<nbflow run snapshot: flow {self._flow_name!r}, {n} node{'s' if n != 1 else ''}>",
        }


def _transcript_size(rec: NodeRecord | None) -> tuple[int, int]:
    """What the inspector's transcript shows changed when this changes: calls made, characters streamed."""
    if rec is None:
        return (0, 0)
    attempts = rec._c.attempts[rec._i]
    if type(attempts) is not list:  # none yet, or the lean path's one (it records no call)
        return (0, 0)
    calls = sum(len(a.calls) for a in attempts if a.calls)
    last = attempts[-1].stream if attempts else None
    return (calls, sum(map(len, last)) if last else 0)


def _snapshot_transcripts(run: Run, redact: Callable[[str], str]) -> str:
    """The saved snapshot's transcripts: one closed section per node that made model calls."""
    parts = []
    for path, rec in run.walk():
        body = transcript_html(rec.attempts, redact, open_=False) if _transcript_size(rec)[0] else ""
        if body:
            parts.append(f'<div style="margin-top:4px"><b>{esc(path)}</b>{body}</div>')
        if len(parts) >= SNAPSHOT_ROWS:
            break
    return "".join(parts)


def _more_nodes_html(left_out: Mapping[str, int]) -> str:
    """The line under a big run's snapshot table: how many nodes it leaves out, in which states, and where
    to see them (none of them failed, was cancelled, paused or running: those are always listed)."""
    n = sum(left_out.values())
    states = ", ".join(f"{count:,} {state}" for state, count in left_out.items())
    return (
        f'<div style="color:#868e96;font-size:12px">… {n:,} more node{"s" if n != 1 else ""} ({states}; '
        f"every failed, cancelled, paused or running node is listed above). Every node: <code>run.nodes</code>, "
        f"<code>run.to_frame()</code>, or the live view's selector.</div>"
    )


def _hide_dead_widget(snapshot_id: str) -> str:
    """A rule that hides the widget output right after this snapshot while it holds only text.

    Reopened without the kernel that made it, a notebook's widget output reads "Loading widget..." or
    "Error displaying widget: model not found" (JupyterLab, Notebook 7: a text-only output node); the
    snapshot above it is what the user should see. A live widget renders elements into that node, so the
    rule no longer matches and the widget shows (and hides this snapshot: ``hideSnapshot`` in run_view.js).
    Trusted notebooks only: sanitizers drop ``<style>``, and untrusted outputs show no widget anyway.
    """
    after = f".jp-OutputArea-child:has(.nbflow-snap-{snapshot_id}) + .jp-OutputArea-child"
    return (
        # the error (ipywidgets marks it .jupyter-widgets): the whole output, its prompt too; "Loading
        # widget..." (text only: no element inside): the text. (:has() cannot nest, hence two rules.)
        f"<style>{after}:has(> .jp-OutputArea-output.jupyter-widgets) {{ display: none; }} "
        f"{after} > .jp-OutputArea-output:not(:has(*)) {{ display: none; }}</style>"
    )


def _summary_rows(run: Run) -> Iterator[tuple[str, NodeStatus, Any, float | None, BaseException | None, str | None]]:
    """``(path, status, output, duration, error, skip_reason)`` of every node in ``walk``'s order: for a run
    without sub-runs, a plain node (no rare field set) straight from the run's columns (``Run._plain_nodes``),
    no record made; every other node from its record."""
    if len(list(run._column_walk())) > 1:
        for path, rec in run.walk():
            yield path, rec.status, rec.output, rec.duration, rec.error, rec.skip_reason
        return
    for item in run._plain_nodes():
        if type(item) is tuple:
            name, status, output, started, finished, _ran, _inputs = item
            # (NodeRecord.duration's rule: both times known)
            yield name, status, output, None if started is None or finished is None else finished - started, None, None
        else:
            rec = cast("NodeRecord", item)
            yield rec.name, rec.status, rec.output, rec.duration, rec.error, rec.skip_reason


def _states_by_path(columns: list[tuple[str, NodeColumns]]) -> dict[str, NodeStatus]:
    """Each node's state by path (``"sub.node"`` inside a sub-flow) from ``Run._column_walk``'s columns."""
    by_path: dict[str, NodeStatus] = {}
    for prefix, c in columns:
        # not strict: a node being added (NodeColumns.add, in the thread of a blocking ``flow.run``) has its
        # name before its state; it shows at the next redraw
        by_path.update(zip([prefix + n for n in c.names] if prefix else c.names, c.status, strict=False))
    return by_path


_PLAIN_TYPES = frozenset({int, float, complex, bool, type(None), str})
_JUST_DICT = frozenset({dict})


def _holds_no_secret(inputs: list[Mapping[str, Any] | None]) -> bool:
    """True when none of these node inputs can hold a secret: every value a number, bool, None or plain
    ``str`` (not an ``nf.Secret``, no container) under a name that does not look secret.

    Read in C over the whole column (a 1,000-node run of numbers: ~0.25 ms, ~0.43 node by node); when it
    says False, ``_collect_secrets`` looks node by node as before, so what is collected is the same.
    """
    present = cast("list[dict[str, Any]]", list(filter(None, inputs)))
    if not _JUST_DICT.issuperset(map(type, present)):
        return False
    if not _PLAIN_TYPES.issuperset(map(type, chain.from_iterable(map(dict.values, present)))):
        return False
    names = set(chain.from_iterable(present))
    return not any(map(is_secret_name, names))


def _look_state(look: NodeLook) -> list[str]:
    state = look.status.value if look.status is not None else "none"
    label = state + look.note if look.status is not None else "not in run"
    return [state, label, look.tooltip]


def _unlook(path: str, value: list[str]) -> NodeLook:
    state, label, tip = value
    status = NodeStatus(state) if state != "none" else None
    note = label[len(state) :] if status is not None else ""
    return NodeLook(status, tip, False, note)


def _not_taken(reason: str) -> bool:
    """A skip that is a normal outcome: a router chose another branch."""
    return "not taken" in reason


def _without_message(traceback: str, message: str) -> str:
    """The traceback without its final 'Type: message' lines (the inspector shows the message above it)."""
    text = traceback.rstrip("\n")
    if text.endswith(message):
        return text[: -len(message)].rstrip("\n")
    return text


def _elapsed(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"
