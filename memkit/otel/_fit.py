"""A foreign span's step made to fit the store's limits instead of refused: its payload is the agent's data.

An instrumentation writes what it likes into a span: a LangChain model's output nests tool-call
arguments ten levels down, a value may be ``NaN``, an integer beyond 64 bits, a lone surrogate, or
megabytes of text. A step that :func:`~memkit._core._records.trace_record` refuses for its shape is
made to fit here: a value metadata cannot hold becomes its JSON text (``{"value": text}``, as a
non-JSON input already is), a lone surrogate U+FFFD, and a step still too big for the limits has its
longest texts cut, each ending in :data:`CUT_MARK` and its length in all, and ``"truncated": true``
beside them. Only the import's and the live processor's steps are fitted; ``add_trace`` keeps refusing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from memkit._core._errors import InvalidInputError
from memkit._core._records import Record, trace_record
from memkit._core._validate import Limits, check_metadata

__all__ = ["CUT_MARK", "fitted_record", "fitted_step", "record_of"]

#: What ends a text cut to fit a step in the store's limits, before the text's whole length.
CUT_MARK = "…[cut by memkit: "
_SHORTEST = 200  # a text is never cut shorter than this: below it, the step's other fields are the excess
# The step's own fields, which a span's payload cannot change the shape of.
_KEPT = frozenset(("timestamp", "duration", "retry_count", "step_index", "parent_step_index", "run_id",
                   "trace_id", "span_id", "parent_span_id", "span_kind", "status"))


def _text(value: str) -> str:
    """``value`` with any lone surrogate as U+FFFD: it can be neither UTF-8 nor sent to a server."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value)


def _as_text(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):  # a cycle, or deeper than json walks: its repr is the data left
        text = repr(value)
    return _text(text)


def _shaped(key: str, value: Any, limits: Limits) -> Any:
    """``value`` as step field ``key`` may hold it: itself if metadata takes it there, else as text."""
    if isinstance(value, str):
        return _text(value)
    if value is None or isinstance(value, bool):
        return value
    # The step sits under "trace" in the metadata: a field's value is at depth 3. Size is not the
    # question here (cutting is), so the byte limit is lifted for this check.
    unbounded = dataclasses.replace(limits, max_metadata_bytes=2**62)
    try:
        check_metadata({"trace": {key: value}}, unbounded)
        return value
    except (InvalidInputError, RecursionError):
        text = _as_text(value)
        return {"value": text} if key in ("parameters", "result") else text


def fitted_step(data: Mapping[str, Any], limits: Limits) -> dict[str, Any]:
    """``data`` (a planned step) with every field in a shape the store takes; see the module."""
    return {key: value if key in _KEPT else _shaped(key, value, limits) for key, value in data.items()}


def _kept(text: str) -> str:
    """What is left of ``text`` before a cut's mark (all of it if it was never cut)."""
    at = text.rfind(CUT_MARK)
    return text[:at] if at >= 0 and text.endswith(" characters]") else text


def _longest(data: dict[str, Any]) -> tuple[str, bool, int] | None:
    """The field holding the longest text a cut can still shorten: (key, inside ``{"value": ...}``,
    length kept)."""
    best: tuple[str, bool, int] | None = None
    for key, value in data.items():
        if key in _KEPT:
            continue
        boxed = isinstance(value, dict) and list(value) == ["value"] and isinstance(value["value"], str)
        if boxed:
            size = len(_kept(value["value"]))
        elif isinstance(value, str):
            size = len(_kept(value))
        elif isinstance(value, (dict, list)):
            size = len(_as_text(value))
        else:
            continue
        if size > _SHORTEST and (best is None or size > best[2]):
            best = (key, boxed, size)
    return best


def _cut(data: dict[str, Any], key: str, boxed: bool) -> None:
    """Halve the text of field ``key`` (never below :data:`_SHORTEST`), marked with its whole length."""
    value = data[key]
    text = value["value"] if boxed else value if isinstance(value, str) else _as_text(value)
    kept = _kept(text)
    whole = text[len(kept) + len(CUT_MARK):-len(" characters]")] if kept != text else f"{len(text):,}"
    cut = f"{kept[: max(_SHORTEST, len(kept) // 2)]}{CUT_MARK}{whole} characters]"
    data[key] = {"value": cut} if boxed or key in ("parameters", "result") else cut
    data["truncated"] = True


def fitted_record(
    agent: str, workflow: str, data: dict[str, Any], user: str, limits: Limits
) -> tuple[Record, dict[str, Any], bool]:
    """The record of a step ``trace_record`` refused for its payload, fitted (see the module), the
    fitted step, and whether a text was cut; a step refused for anything else (an id) is still refused."""
    step = fitted_step(data, limits)
    while True:
        try:
            return trace_record(agent, workflow, step, user, limits), step, bool(step.get("truncated"))
        except InvalidInputError:
            longest = _longest(step)
            if longest is None:
                raise
            _cut(step, longest[0], longest[1])


def record_of(agent: str, workflow: str, data: dict[str, Any], user: str, limits: Limits) -> tuple[Record, bool]:
    """The record of a planned step, fitted if ``trace_record`` refuses it as it is (see the module),
    and whether a text was cut."""
    try:
        return trace_record(agent, workflow, data, user, limits), False
    except InvalidInputError:
        record, _, cut = fitted_record(agent, workflow, data, user, limits)
        return record, cut
