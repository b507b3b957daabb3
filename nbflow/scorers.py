"""Ready-made scorer nodes: each factory declares one node on your flow and returns its function.

Every scorer returns an ``nf.Score``: the batch frame gets the value as the node's column (bool or number,
what ``nf.summarize`` and ``nf.compare`` read) and ``<node>.explanation`` beside it (the explorer shows
it). Each factory is a few lines of plain code: read one, copy it, change it::

    from nbflow import scorers

    scorers.exact_match(flow, output="answer", target="expected")          # node "exact_match"
    scorers.includes(flow, output="answer", target="keyword", name="mentions")
    scorers.numeric(flow, output="answer", target="expected", tolerance=0.01)
    scorers.model_graded(flow, output="answer", question="question", target="expected", client="judge")

``output`` / ``target`` / ``question`` name the node or flow input (a row column) each parameter is fed
from; ``name`` is the node's name (its column); other keywords go to ``flow.node`` (``retry=``, ``uses=``).

The judges (``model_graded``, ``pairwise_judge``) call an OpenAI-compatible chat client declared as a
``@flow.resource`` (named by ``client=``), report each call's tokens and cost with ``nf.usage`` (a
``price=(input, output)`` per million tokens gives the cost) and raise ``nf.ScorerError`` when the judge
answers off-format; a judge whose call fails fails the row, like any node (``retry=`` retries it).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
import zlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from nbflow._core.errors import ScorerError
from nbflow._core.score import Score
from nbflow._core.usage import CURRENT_NODE, usage

if TYPE_CHECKING:
    import pandas as pd

    from nbflow._flow.flow import Flow

__all__ = [
    "GRADED_RUBRIC",
    "PAIRWISE_RUBRIC",
    "exact_match",
    "includes",
    "json_valid",
    "model_graded",
    "normalize",
    "normalized_match",
    "numeric",
    "pairs",
    "pairwise_judge",
    "pairwise_verdict",
    "regex",
]


def _show(text: str, limit: int = 80) -> str:
    text = str(text)
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def normalize(text: str) -> str:
    """Text compared for meaning, not form: Unicode NFKC, case folded, punctuation dropped, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", str(text)).casefold()
    text = "".join(" " if unicodedata.category(c).startswith("P") else c for c in text)
    return " ".join(text.split())


# --- text -----------------------------------------------------------------------------------------
def exact_match(
    flow: Flow, output: str = "output", target: str = "target", *, name: str = "exact_match", **options: Any
) -> Callable[..., Score]:
    """True when the output equals the target exactly (surrounding whitespace ignored)."""

    def exact_match(output: Any, target: Any) -> Score:
        got, want = str(output).strip(), str(target).strip()
        if got == want:
            return Score(True, "matches the target")
        return Score(False, f"expected {_show(want)}, got {_show(got)}")

    return flow.node(name=name, inputs={"output": output, "target": target}, **options)(exact_match)


def normalized_match(
    flow: Flow, output: str = "output", target: str = "target", *, name: str = "normalized_match", **options: Any
) -> Callable[..., Score]:
    """True when the output equals the target after ``normalize`` (case, punctuation, spacing, Unicode forms)."""

    def normalized_match(output: Any, target: Any) -> Score:
        got, want = normalize(output), normalize(target)
        if got == want:
            return Score(True, f"matches the target as {_show(want)}")
        return Score(False, f"expected {_show(want)}, got {_show(got)} (normalized)")

    return flow.node(name=name, inputs={"output": output, "target": target}, **options)(normalized_match)


def includes(
    flow: Flow,
    output: str = "output",
    target: str = "target",
    *,
    name: str = "includes",
    ignore_case: bool = True,
    **options: Any,
) -> Callable[..., Score]:
    """True when the target text appears in the output (``ignore_case=True``: case folded first)."""

    def includes(output: Any, target: Any) -> Score:
        got, want = str(output), str(target)
        if not want:
            raise ScorerError(f"node {name!r}: the target is empty, so every output would include it; fix the row")
        hay, needle = (got.casefold(), want.casefold()) if ignore_case else (got, want)
        at = hay.find(needle)
        if at >= 0:
            return Score(True, f"found {_show(want)} at character {at}")
        return Score(False, f"{_show(want)} not in the output {_show(got)}")

    return flow.node(name=name, inputs={"output": output, "target": target}, **options)(includes)


def regex(
    flow: Flow, pattern: str, output: str = "output", *, name: str = "regex", flags: int = 0, **options: Any
) -> Callable[..., Score]:
    """True when ``pattern`` (a regular expression, searched anywhere; anchor it for a full match) is in the output."""
    try:
        compiled = re.compile(pattern, flags)
    except re.error as exc:
        raise ScorerError(
            f"scorers.regex(name={name!r}): the pattern {pattern!r} is not a regular expression: {exc}"
        ) from None

    def regex(output: Any) -> Score:
        found = compiled.search(str(output))
        if found:
            return Score(True, f"/{pattern}/ matched {_show(found.group(0))} at character {found.start()}")
        return Score(False, f"/{pattern}/ not found in {_show(output)}")

    return flow.node(name=name, inputs={"output": output}, **options)(regex)


_NUMBER = re.compile(r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+−]?\.\d+")


def numeric(
    flow: Flow,
    output: str = "output",
    target: str = "target",
    *,
    name: str = "numeric",
    tolerance: float = 1e-6,
    relative: float = 0.0,
    **options: Any,
) -> Callable[..., Score]:
    """True when the last number in the output is within ``tolerance`` (or ``relative`` × |target|) of the target.

    "The answer is 1,234.5" reads 1234.5; a number or a numeric text target works."""

    def numeric(output: Any, target: Any) -> Score:
        want = _number(target)
        if want is None:
            raise ScorerError(f"node {name!r}: the target {_show(target)} is not a number; fix the row's target column")
        found = _NUMBER.findall(str(output)) if not isinstance(output, int | float) else [str(output)]
        if not found:
            return Score(False, f"no number in the output {_show(output)}")
        got = _number(found[-1])
        assert got is not None
        allowed = max(tolerance, relative * abs(want))
        if abs(got - want) <= allowed:
            return Score(True, f"{got:g} is within {allowed:g} of {want:g}")
        return Score(False, f"{got:g} is {abs(got - want):g} from {want:g} (allowed {allowed:g})")

    return flow.node(name=name, inputs={"output": output, "target": target}, **options)(numeric)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    try:
        return float(str(value).strip().replace(",", "").replace("−", "-"))
    except ValueError:
        return None


def json_valid(
    flow: Flow, output: str = "output", *, schema: Any = None, name: str = "json_valid", **options: Any
) -> Callable[..., Score]:
    """True when the output parses as JSON (a ```json fence around it is allowed) and, given a ``schema`` (a
    pydantic model class or a JSON Schema dict, the latter checked with the ``jsonschema`` package), fits it."""
    check: Callable[[Any], str | None] | None = None
    if schema is not None:
        if isinstance(schema, Mapping):
            try:
                import jsonschema
            except ImportError:
                raise ScorerError(
                    f"scorers.json_valid(name={name!r}, schema={{...}}): a JSON Schema needs the jsonschema package "
                    "(pip install 'nbflow[scorers]'), or pass a pydantic model class as schema="
                ) from None
            validator = jsonschema.validators.validator_for(schema)(schema)

            def check(value: Any) -> str | None:
                errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
                if not errors:
                    return None
                where = "/".join(map(str, errors[0].path)) or "the top level"
                return f"at {where}: {errors[0].message}"

        elif hasattr(schema, "model_validate"):

            def check(value: Any) -> str | None:
                import pydantic

                try:
                    schema.model_validate(value)
                except pydantic.ValidationError as exc:
                    first = exc.errors()[0]
                    where = ".".join(map(str, first["loc"])) or "the top level"
                    return f"at {where}: {first['msg']} ({exc.error_count()} error(s) against {schema.__name__})"
                return None

        else:
            raise ScorerError(
                f"scorers.json_valid(name={name!r}, schema=...) takes a pydantic model class or a JSON Schema dict, "
                f"got {type(schema).__name__}"
            )

    def json_valid(output: Any) -> Score:
        text = str(output).strip()
        fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.DOTALL)
        if fenced:
            text = fenced.group(1)
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            return Score(False, f"not JSON: {exc.msg} at character {exc.pos} of {_show(text)}")
        problem = check(value) if check is not None else None
        if problem:
            return Score(False, f"JSON, but does not fit the schema {problem}")
        return Score(True, "valid JSON" + (" that fits the schema" if check is not None else ""))

    return flow.node(name=name, inputs={"output": output}, **options)(json_valid)


# --- judges ---------------------------------------------------------------------------------------
GRADED_RUBRIC = """You are grading an answer to a question.

[Question]
{question}

[Reference answer]
{target}

[Answer to grade]
{output}

Compare the answer with the reference: is it correct (C), partially correct (P) or incorrect (I)?
Explain in one or two sentences, then end with a last line of the form "GRADE: C", "GRADE: P" or "GRADE: I"."""

PAIRWISE_RUBRIC = """You are comparing two answers to the same question.

[Question]
{question}

[Answer 1]
{first}

[Answer 2]
{second}

Which answer is better: more correct, then more helpful? Explain in one or two sentences, then end with
a last line "WINNER: 1", "WINNER: 2" or "WINNER: TIE"."""


def _cost(response: Any, price: tuple[float, float] | None) -> float | None:
    """The call's cost from ``price`` = (input, output) per million tokens; None (unknown) without a price."""
    used = getattr(response, "usage", None)
    if price is None or used is None:
        return None
    return (used.prompt_tokens * price[0] + used.completion_tokens * price[1]) / 1e6


async def _ask_judge(judge: Any, model: str, prompt: str, price: tuple[float, float] | None, **kwargs: Any) -> str:
    """One chat call to the judge; its tokens and cost are recorded on the scorer node (``nf.usage``)."""
    response = await judge.chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}], **kwargs
    )
    if getattr(response, "usage", None) is not None and CURRENT_NODE.get() is not None:  # (called in a node)
        usage(response, cost=_cost(response, price), model=model)
    return str(response.choices[0].message.content or "")


def _fields(template: str, allowed: set[str], where: str) -> None:
    import string

    try:
        names = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        raise ScorerError(f"{where}: the rubric is not a format template: {exc}") from None
    unknown = names - allowed
    if unknown:
        raise ScorerError(
            f"{where}: the rubric uses {{{sorted(unknown)[0]}}}, which it cannot fill; it may use "
            f"{', '.join('{' + a + '}' for a in sorted(allowed))} (write {{{{ and }}}} for literal braces)"
        )


def _last(pattern: str, answer: str) -> str | None:
    found = re.findall(pattern, answer, re.IGNORECASE | re.MULTILINE)
    return found[-1].strip().upper() if found else None


def model_graded(
    flow: Flow,
    output: str = "output",
    question: str = "question",
    target: str | None = None,
    *,
    client: str = "judge",
    model: str = "gpt-4o-mini",
    rubric: str = GRADED_RUBRIC,
    grades: Mapping[str, float] | None = None,
    price: tuple[float, float] | None = None,
    name: str = "model_graded",
    **options: Any,
) -> Callable[..., Any]:
    """An LLM judge: ``rubric`` filled with ``{question}``, ``{output}`` (and ``{target}``, the reference answer,
    when ``target=`` names its column) is sent to ``model`` through the ``client`` resource (an
    ``openai.AsyncOpenAI``-compatible client declared with ``@flow.resource``). The judge's last
    ``GRADE: <letter>`` line picks the value from ``grades`` (default C = 1.0, P = 0.5, I = 0.0); the rest of
    its answer is the explanation. An answer without such a line raises ``nf.ScorerError`` (the row fails)."""
    scale = dict(grades or {"C": 1.0, "P": 0.5, "I": 0.0})
    keys = {k.upper(): float(v) for k, v in scale.items()}
    _fields(rubric, {"question", "output", "target"} if target else {"question", "output"}, f"model_graded({name!r})")
    letters = "|".join(map(re.escape, sorted(keys, key=len, reverse=True)))

    async def grade(prompt: str, judge: Any) -> Score:
        answer = await _ask_judge(judge, model, prompt, price)
        letter = _last(rf"^\W*GRADE\W*\s*({letters})\b", answer)
        if letter is None:
            raise ScorerError(
                f"node {name!r}: the judge's answer has no last line 'GRADE: <{'|'.join(keys)}>' "
                f"(it answered {_show(answer, 200)}); make the rubric ask for that line, or pass grades= "
                f"with the grades the judge gives"
            )
        explanation = re.sub(rf"\n?[^\n]*GRADE\W*\s*(?:{letters})\b[^\n]*\s*$", "", answer, flags=re.IGNORECASE).strip()
        return Score(keys[letter], explanation or f"GRADE: {letter}", {"grade": letter})

    if target is None:

        async def model_graded(output: Any, question: Any, judge: Any) -> Score:
            return await grade(rubric.format(question=question, output=output), judge)

        return flow.node(name=name, inputs={"output": output, "question": question, "judge": client}, **options)(
            model_graded
        )

    async def model_graded_with_target(output: Any, question: Any, target: Any, judge: Any) -> Score:
        return await grade(rubric.format(question=question, output=output, target=target), judge)

    inputs = {"output": output, "question": question, "target": target, "judge": client}
    return flow.node(name=name, inputs=inputs, **options)(model_graded_with_target)


def pairs(frame: pd.DataFrame, a: str, b: str, *, by: str, output: str) -> list[dict[str, Any]]:
    """The rows for a pairwise judge: one per case of ``frame`` run with both ``by == a`` and ``by == b``,
    holding the case's columns, ``output_a`` / ``output_b`` (the two variants' ``output``) and ``label_a`` /
    ``label_b`` (their names). Cases where a side did not succeed are left out."""
    from nbflow._batch.summary import case_columns
    from nbflow._core.errors import BatchError

    for col in (by, output):
        if col not in frame.columns:
            raise BatchError(f"scorers.pairs(): {col!r} is not a column; columns: {', '.join(map(str, frame.columns))}")
    keys = case_columns(frame, [by])
    ok = frame[frame["status"] == "succeeded"]
    sides = {}
    for name in (a, b):
        side = ok[ok[by] == name]
        if side.empty:
            raise BatchError(f"scorers.pairs(by={by!r}): no succeeded rows with {by} == {name!r}")
        sides[name] = {repr(tuple(r[k] for k in keys)): r for _, r in side.iterrows()}
    rows = []
    for case, ra in sides[a].items():
        rb = sides[b].get(case)
        if rb is not None:
            rows.append(
                {**{k: ra[k] for k in keys}, "output_a": ra[output], "output_b": rb[output], "label_a": a, "label_b": b}
            )
    return rows


def pairwise_judge(
    flow: Flow,
    question: str = "question",
    *,
    first: str = "output_a",
    second: str = "output_b",
    client: str = "judge",
    model: str = "gpt-4o-mini",
    rubric: str = PAIRWISE_RUBRIC,
    seed: int = 0,
    price: tuple[float, float] | None = None,
    name: str = "preference",
    **options: Any,
) -> Callable[..., Any]:
    """An LLM judge of two answers to one question (rows from ``pairs``): 1.0 when ``second`` (variant b) is
    better, 0.0 when ``first`` (a) is, 0.5 for a tie. The order the judge sees them in is drawn per case from
    ``seed`` and the answers (position bias cancels out over cases) and recorded: ``<name>.shown_first``
    ("a" or "b") and ``<name>.seed``. An answer without a last ``WINNER: 1|2|TIE`` line raises ScorerError."""
    _fields(rubric, {"question", "first", "second"}, f"pairwise_judge({name!r})")

    async def pairwise_judge(question: Any, first: Any, second: Any, judge: Any) -> Score:
        swap = zlib.crc32(f"{seed}\x00{question}\x00{first}\x00{second}".encode()) % 2 == 1
        shown = (second, first) if swap else (first, second)
        answer = await _ask_judge(
            judge, model, rubric.format(question=question, first=shown[0], second=shown[1]), price
        )
        winner = _last(r"^\W*WINNER\W*\s*(1|2|TIE)\b", answer)
        if winner is None:
            raise ScorerError(
                f"node {name!r}: the judge's answer has no last line 'WINNER: 1', 'WINNER: 2' or 'WINNER: TIE' "
                f"(it answered {_show(answer, 200)}); make the rubric ask for that line"
            )
        if winner == "TIE":
            value = 0.5
        else:
            b_won = (winner == "2") != swap  # answer 2 is b unless the order was swapped
            value = 1.0 if b_won else 0.0
        explanation = re.sub(r"\n?[^\n]*WINNER\W*\s*(1|2|TIE)\b[^\n]*\s*$", "", answer, flags=re.IGNORECASE).strip()
        return Score(value, explanation or f"WINNER: {winner}", {"shown_first": "b" if swap else "a", "seed": seed})

    inputs = {"question": question, "first": first, "second": second, "judge": client}
    return flow.node(name=name, inputs=inputs, **options)(pairwise_judge)


def pairwise_verdict(frame: pd.DataFrame, score: str = "preference", *, alpha: float = 0.05) -> str:
    """One line from a pairwise judge's frame: wins, losses and ties of b against a, and the sign test."""
    from nbflow._batch.stats import sign_test

    values = [float(v) for v, s in zip(frame[score], frame["status"], strict=True) if s == "succeeded"]
    wins, losses = sum(v == 1.0 for v in values), sum(v == 0.0 for v in values)
    ties = len(values) - wins - losses
    a = frame["label_a"].iloc[0] if "label_a" in frame and len(frame) else "a"
    b = frame["label_b"].iloc[0] if "label_b" in frame and len(frame) else "b"
    p = sign_test(wins, losses)
    pv = "p < 0.001" if p < 0.001 else f"p = {p:.2g}"
    counts = f"{b} preferred on {wins}, {a} on {losses}, {ties} tie{'s' if ties != 1 else ''} of {len(values)}"
    if p < alpha:
        return f"{score}: {counts}; sign test {pv}"
    return f"{score}: no evidence that the judge prefers either ({counts}; sign test {pv})"
