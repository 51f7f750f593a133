"""Marks: a researcher's verdict on what a step recalled (relevant or not) and on the step itself.

A mark lives in the namespace of what it judges: a memory mark in the namespace the
recall searched, a step mark in the namespace of the step's trace record. There is one
mark per target: marking the same recalled memory (or step) again replaces the mark.
Its id is derived from the namespace and the target, so a replacement can never reach
into another namespace, and an import cannot hold two marks on one target.

Memory marks are a retrieval evaluation set: each names a query (the recall's) and a
memory the researcher judged; :func:`memkit.evaluate` reruns the queries.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

import pydantic_core

from memkit._core._errors import InvalidInputError, NotFoundError
from memkit._core._models import MemoryItem
from memkit._core._recalls import Mark, Recall
from memkit._core._records import from_us, now_us
from memkit._core._validate import DEFAULT_LIMITS, Limits, check_id, check_namespace, check_text

__all__ = [
    "MAX_NOTE_CHARS",
    "check_flag",
    "check_note",
    "check_reads",
    "checked_ids",
    "checked_marks",
    "dumps",
    "is_step",
    "loads",
    "mark_id",
    "matching",
    "memory_mark",
    "no_recall",
    "no_step",
    "ordered",
    "step_mark",
]

MAX_NOTE_CHARS = 2_000
"""Longest note a mark keeps: a short reason, not a report."""

MEMORY_LABELS = ("relevant", "not_relevant")
STEP_LABELS = ("good", "bad")

# Newlines and tabs are text; other control characters (a terminal escape, a NUL) are not.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def mark_id(user_id: str, agent_id: str, recall_id: str | None, memory_id: str | None, step_id: str | None) -> str:
    """The id of the one mark a namespace may hold on a target (32 hex digits)."""
    key = json.dumps([user_id, agent_id, recall_id, memory_id, step_id], ensure_ascii=True)
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def check_note(note: object) -> str:
    if not isinstance(note, str):
        raise InvalidInputError(f"note must be a string, got {type(note).__name__}")
    check_text(note, "note")
    if len(note) > MAX_NOTE_CHARS:
        raise InvalidInputError(f"note is {len(note)} characters; the limit is {MAX_NOTE_CHARS}")
    if _CONTROL.search(note):
        raise InvalidInputError("note must not contain control characters (newlines and tabs are fine)")
    return note


def check_flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInputError(f"{name} must be True or False, got {value!r}")
    return value


def memory_mark(recall: Recall, memory_id: object, relevant: object, note: object) -> Mark:
    """A mark on one memory ``recall`` returned; a memory it did not return is refused."""
    check_id(memory_id, "memory_id")
    label = "relevant" if check_flag(relevant, "relevant") else "not_relevant"
    text = check_note(note)
    if not any(hit.id == memory_id for hit in recall.hits):
        raise InvalidInputError(
            f"memory {memory_id!r} is not among the {len(recall.hits)} memories recall {recall.id!r} returned"
        )
    assert isinstance(memory_id, str)
    return Mark(
        id=mark_id(recall.user_id, recall.agent_id, recall.id, memory_id, None),
        created_at=from_us(now_us()), user_id=recall.user_id, agent_id=recall.agent_id, label=label,
        note=text, recall_id=recall.id, memory_id=memory_id, query=recall.query,
        workflow_id=recall.workflow_id, run_id=recall.run_id, step_index=recall.step_index,
        step_name=recall.step_name,
    )


def step_mark(step: MemoryItem, good: object, note: object) -> Mark:
    """A mark on one trace step (``step`` is its trace record, read from the store)."""
    label = "good" if check_flag(good, "good") else "bad"
    text = check_note(note)
    meta = step.metadata
    raw = meta.get("trace")
    trace: dict[str, Any] = raw if isinstance(raw, dict) else {}
    index = meta.get("step_index", trace.get("step_index"))
    name = meta.get("step_name", trace.get("step_name"))
    run_id = meta.get("run_id", trace.get("run_id"))
    assert step.user_id is not None and step.agent_id is not None
    return Mark(
        id=mark_id(step.user_id, step.agent_id, None, None, step.id),
        created_at=from_us(now_us()), user_id=step.user_id, agent_id=step.agent_id, label=label, note=text,
        step_id=step.id, workflow_id=_text_or_none(meta.get("workflow_id")), run_id=_text_or_none(run_id),
        step_index=index if isinstance(index, int) and not isinstance(index, bool) else None,
        step_name=_text_or_none(name),
    )


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def is_step(item: MemoryItem | None, user_id: str, agent_id: str) -> bool:
    """Whether ``item`` is a trace step stored in ``user_id``/``agent_id``."""
    return (
        item is not None and (item.user_id, item.agent_id) == (user_id, agent_id)
        and item.metadata.get("type") == "trace"
    )


def no_recall(recall_id: str, user_id: str, agent_id: str) -> NotFoundError:
    return NotFoundError(f"no recall {recall_id!r} in namespace {user_id!r} / {agent_id!r}")


def no_step(step_id: str, user_id: str, agent_id: str) -> NotFoundError:
    return NotFoundError(f"no trace step {step_id!r} in namespace {user_id!r} / {agent_id!r}")


def checked_marks(marks: Iterable[Mark], limits: Limits = DEFAULT_LIMITS) -> list[Mark]:
    """Marks to write, checked like any other write: namespaces, ids, labels that fit the target, notes."""
    if isinstance(marks, (str, bytes, Mark)) or not isinstance(marks, Iterable):
        raise InvalidInputError("marks must be an iterable of Mark")
    batch: dict[str, Mark] = {}
    for mark in marks:
        if not isinstance(mark, Mark):
            raise InvalidInputError(f"marks must be Mark objects, got {type(mark).__name__}")
        check_namespace(mark.user_id, mark.agent_id, limits)
        check_note(mark.note)
        if mark.step_id is not None:
            check_id(mark.step_id, "step_id", limits)
            if mark.recall_id is not None or mark.memory_id is not None or mark.label not in STEP_LABELS:
                raise InvalidInputError(f"mark {mark.id!r}: a step mark is 'good' or 'bad' and names no recall")
        else:
            if mark.recall_id is None or mark.memory_id is None or mark.label not in MEMORY_LABELS:
                raise InvalidInputError(
                    f"mark {mark.id!r}: a memory mark is 'relevant' or 'not_relevant' and names a recall_id"
                    " and a memory_id"
                )
            check_id(mark.recall_id, "recall_id", limits)
            check_id(mark.memory_id, "memory_id", limits)
        expected = mark_id(mark.user_id, mark.agent_id, mark.recall_id, mark.memory_id, mark.step_id)
        if mark.id != expected:
            raise InvalidInputError(f"mark id {mark.id!r} does not match its namespace and target ({expected!r})")
        if mark.id in batch:
            raise InvalidInputError(f"two marks on the same target (mark id {mark.id!r})")
        batch[mark.id] = mark
    return list(batch.values())


def dumps(mark: Mark) -> str:
    """A mark as one JSON object (how stores keep it, and the JSONL export's mark lines)."""
    return pydantic_core.to_json(mark.model_dump(mode="json")).decode()


def loads(text: str) -> Mark:
    """A stored mark, read back."""
    return Mark.model_validate_json(text)


def ordered(marks: Iterable[Mark]) -> list[Mark]:
    """Oldest first (every store returns marks in this order)."""
    return sorted(marks, key=lambda m: (m.created_at, m.id))


def matching(
    marks: Iterable[Mark], user_id: str | None, agent_id: str | None, workflow_id: str | None, run_id: str | None
) -> list[Mark]:
    """The marks of one namespace / workflow / run (``None`` matches anything), oldest first.

    Exact comparison here too, on every store: what a database's index matched is narrowed, never widened.
    """
    return ordered(
        m for m in marks
        if (user_id is None or m.user_id == user_id) and (agent_id is None or m.agent_id == agent_id)
        and (workflow_id is None or m.workflow_id == workflow_id) and (run_id is None or m.run_id == run_id)
    )


def checked_ids(mark_ids: Iterable[str], limits: Limits = DEFAULT_LIMITS) -> list[str]:
    """Mark ids to remove: an iterable of ids (one string alone is refused: it would be its characters)."""
    if isinstance(mark_ids, (str, bytes)) or not isinstance(mark_ids, Iterable):
        raise InvalidInputError("mark_ids must be a list of mark ids")
    return list(dict.fromkeys(check_id(i, "mark id", limits) for i in mark_ids))


def check_reads(limits: Limits, **wanted: str | None) -> None:
    """The filters of a ``marks()`` read: ids or ``None``."""
    for name, value in wanted.items():
        if value is not None:
            check_id(value, name, limits)
