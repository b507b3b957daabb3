"""A node's model calls as a chat transcript (the run view's inspector and its saved snapshot).

Each call (``nbflow._core.calls.Call``) shows as a header (model, API, tokens, latency, retry, status),
then the messages the model was sent and what it answered, one bubble per message, coloured by role.
Inline styles only: the snapshot goes through HTML sanitizers that drop ``<style>``; the colours are
mid tones over a translucent background and the text inherits its colour, so both light and dark
themes read well. Every text is escaped and passed through the view's redactor (secrets masked).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from nbflow.widgets.style import esc

__all__ = ["stream_html", "transcript_html"]

_ROLE_COLOURS = {"system": "#868e96", "user": "#1c7ed6", "assistant": "#2f9e44", "tool": "#e67700"}
_MAX_TEXT = 20_000  # characters of one message shown (the data keeps all of it: run.calls())
_MAX_CALLS = 50  # calls listed per node before "N more"
_BUBBLE = (
    "margin:3px 0;padding:4px 8px;border-left:3px solid {colour};border-radius:4px;"
    "background:rgba(128,128,128,0.10);white-space:pre-wrap;word-break:break-word;font-size:12px"
)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts
        parts = [
            str(p.get("text", "")) if isinstance(p, dict) and "text" in p else json.dumps(p, default=str) for p in value
        ]
        return "\n".join(parts)
    return json.dumps(value, default=str)


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + f"… ({len(text) - _MAX_TEXT:,} more characters)"


def _bubble(role: str, body: str, redact: Callable[[str], str]) -> str:
    colour = _ROLE_COLOURS.get(role, "#868e96")
    return (
        f'<div class="nbflow-msg nbflow-msg-{esc(role)}" style="{_BUBBLE.format(colour=colour)}">'
        f'<span style="color:{colour};font-weight:600;font-size:11px">{esc(role)}</span>\n'
        f"{esc(redact(_clip(body)))}</div>"
    )


def _tool_calls(calls: Sequence[Any]) -> str:
    return "\n".join(f"→ {c.get('name')}({c.get('arguments') or ''})" if isinstance(c, dict) else str(c) for c in calls)


def _call_html(number: int, attempt: int, call: Any, redact: Callable[[str], str], tries: int) -> str:
    bits = [f"<b>{esc(call.model or 'model')}</b>", esc(call.api)]
    if call.input_tokens is not None or call.output_tokens is not None:
        bits.append(f"{call.input_tokens or 0} → {call.output_tokens or 0} tokens")
    if call.cost is not None:
        bits.append(f"cost {call.cost:.6g}")
    if call.latency is not None:
        bits.append(f"{call.latency:.3f}s")
    if call.streamed:
        bits.append("streamed")
    if call.retry:
        bits.append(f"retry {call.retry}")
    if tries > 1:
        bits.append(f"attempt {attempt}")
    if call.finish_reason:
        bits.append(f"finish: {esc(call.finish_reason)}")
    head = f'<div style="font-size:11px;opacity:0.8">#{number} · ' + " · ".join(bits) + "</div>"
    parts = [head]
    for m in call.messages or ():
        if isinstance(m, dict):
            body = _text(m.get("content"))
            if m.get("tool_calls"):
                body = (body + "\n" if body else "") + _tool_calls(
                    [
                        {
                            "name": (t.get("function") or {}).get("name"),
                            "arguments": (t.get("function") or {}).get("arguments"),
                        }
                        for t in m["tool_calls"]
                        if isinstance(t, dict)
                    ]
                )
            parts.append(_bubble(str(m.get("role") or m.get("type") or "user"), body, redact))
        else:
            parts.append(_bubble("user", _text(m), redact))
    if call.tools:
        names = ", ".join(
            str((t.get("function") or t).get("name", "?")) if isinstance(t, dict) else str(t) for t in call.tools
        )
        parts.append(f'<div style="font-size:11px;opacity:0.8">tools offered: {esc(redact(names))}</div>')
    if call.error is not None:
        parts.append(
            '<div class="nbflow-msg nbflow-msg-error" style="margin:3px 0;padding:4px 8px;border-left:3px solid #e03131;'
            'border-radius:4px;background:rgba(224,49,49,0.12);white-space:pre-wrap;font-size:12px">'
            f"{esc(redact(call.error))}</div>"
        )
    else:
        body = _text(call.content)
        if call.tool_calls:
            body = (body + "\n" if body else "") + _tool_calls(call.tool_calls)
        parts.append(_bubble("assistant", body, redact))
    return f'<div class="nbflow-call" style="margin:6px 0 10px">{"".join(parts)}</div>'


def transcript_html(attempts: Sequence[Any], redact: Callable[[str], str], *, open_: bool = True) -> str:
    """The model calls of a node's attempts as a chat transcript ("" when it made none)."""
    calls = [(a.number, c) for a in attempts for c in (getattr(a, "calls", None) or ())]
    if not calls:
        return ""
    tries = len(attempts)
    shown = "".join(_call_html(n + 1, at, c, redact, tries) for n, (at, c) in enumerate(calls[:_MAX_CALLS]))
    more = (
        f'<div style="opacity:0.7">… {len(calls) - _MAX_CALLS} more calls (run.calls(node) has them all)</div>'
        if len(calls) > _MAX_CALLS
        else ""
    )
    word = "call" if len(calls) == 1 else "calls"
    return (
        f'<details class="nbflow-transcript"{" open" if open_ else ""}><summary><b>transcript</b> '
        f"({len(calls)} model {word})</summary>{shown}{more}</details>"
    )


def stream_html(attempt: Any, redact: Callable[[str], str]) -> str:
    """What a running node streamed so far (its last ``_MAX_TEXT`` characters), or ""."""
    chunks = getattr(attempt, "stream", None)
    if not chunks:
        return ""
    text = "".join(chunks)
    if len(text) > _MAX_TEXT:
        text = "…" + text[-_MAX_TEXT:]
    return (
        '<div><b>streaming</b></div><pre class="nbflow-stream" style="white-space:pre-wrap;word-break:break-word;'
        f"max-height:320px;overflow:auto;margin:2px 0;padding:4px 8px;border-left:3px solid #f08c00;"
        f'background:rgba(128,128,128,0.10)">{esc(redact(text))}</pre>'
    )
