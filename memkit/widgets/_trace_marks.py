"""The researcher's verdicts in :class:`~memkit.widgets.TraceReplay`: a step marked good or bad, a recalled
memory marked relevant or not, each kept in the namespace it belongs to."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pandas as pd

from memkit._core._errors import InvalidInputError, NotFoundError
from memkit._core._port import SupportsMarks
from memkit._core._recalls import Mark, Recall
from memkit._display import printable
from memkit._recall import _marks
from memkit._sync import Memory
from memkit.widgets._trace_rows import _text

__all__ = ["MarksMixin"]


class MarksMixin:
    """Marks made from the open step's detail (mixed into ``TraceReplay``)."""

    mem: Memory
    steps: pd.DataFrame
    step: int
    detail: dict[str, Any]
    busy: bool
    _recalls: dict[int, list[Recall]]

    if TYPE_CHECKING:
        def say(self, message: str, kind: str = "info") -> None: ...

    def _keeps_marks(self) -> bool:
        return isinstance(self.mem.provider, SupportsMarks)

    def _marks_detail(self, row: pd.Series, step_id: str, index: int | None) -> dict[str, Any]:
        """The marks on this step and on what it recalled, each read in its own namespace."""
        if not self._keeps_marks():
            return {"keeps_marks": False, "step_mark": None}
        recalls = self._recalls.get(index, []) if index is not None else []
        workflow = _text(row["workflow_id"])
        spaces = {(r.user_id, r.agent_id) for r in recalls}
        step_space = (row["user_id"], row["agent_id"])
        if all(isinstance(part, str) for part in step_space):
            spaces.add(step_space)
        marks: list[Mark] = []
        for user, agent in sorted(spaces):
            marks += self.mem.marks(user_id=user, agent_id=agent, workflow_id=workflow)
        on_hits = {(m.user_id, m.agent_id, m.recall_id, m.memory_id): m for m in marks if m.kind == "memory"}
        on_step = next((m for m in marks if m.step_id == step_id and (m.user_id, m.agent_id) == step_space), None)
        return {
            "keeps_marks": True,
            "step_mark": {"label": on_step.label if on_step else None, "note": on_step.note if on_step else ""},
            "hit_marks": {
                f"{r.id} {hit.id}": {"label": m.label, "note": m.note}
                for r in recalls for hit in r.hits
                if (m := on_hits.get((r.user_id, r.agent_id, r.id, hit.id))) is not None
            },
        }

    def _open_step_row(self) -> tuple[pd.Series, str]:
        if self.step < 0 or self.step >= len(self.steps) or not self.detail:
            raise InvalidInputError("open a step first: marks are made in the step detail")
        return self.steps.iloc[self.step], str(self.steps.index[self.step])

    @contextmanager
    def _saving(self) -> Iterator[None]:
        # Busy like working(), but a refusal reaches a Python caller (a click shows it: _guarded).
        self.busy = True
        try:
            yield
        finally:
            self.busy = False

    def _redraw_marks(self) -> None:
        row, step_id = self._open_step_row()
        index = None if row["step_index"] is pd.NA else int(row["step_index"])
        self.detail = {**self.detail, **self._marks_detail(row, step_id, index)}

    def mark_memory(self, recall_id: str, memory_id: str, *, relevant: bool | None, note: str = "") -> Mark | None:
        """Mark a memory the open step recalled as relevant (or not) to the step; the same as its button.

        ``relevant=None`` clears the mark (a click on the pressed button). Only the open step's
        recalls can be marked here, each in the namespace it searched.
        """
        row, _ = self._open_step_row()
        made = self._recalls.get(int(row["step_index"]), []) if row["step_index"] is not pd.NA else []
        recall = next((r for r in made if r.id == recall_id), None)
        if recall is None:
            raise NotFoundError(f"the open step made no recall {printable(str(recall_id))!r}")
        with self._saving():
            if relevant is None:
                self.mem.unmark(_marks.mark_id(recall.user_id, recall.agent_id, recall.id, memory_id, None),
                                user_id=recall.user_id, agent_id=recall.agent_id)
                mark = None
            else:
                mark = self.mem.mark_memory(recall.id, memory_id, relevant=relevant, note=note,
                                            user_id=recall.user_id, agent_id=recall.agent_id)
            self._redraw_marks()
        short = printable(str(memory_id))[:8]
        self.say(f"unmarked memory {short}" if mark is None else
                 f"marked memory {short} {mark.label.replace('_', ' ')}", "ok")
        return mark

    def mark_step(self, *, good: bool | None, note: str = "") -> Mark | None:
        """Mark the open step good or bad, with an optional note; the same as its buttons (``None`` clears)."""
        row, step_id = self._open_step_row()
        user, agent = row["user_id"], row["agent_id"]
        if not isinstance(user, str) or not isinstance(agent, str):
            raise NotFoundError("the open step has no namespace to keep a mark in")
        with self._saving():
            if good is None:
                self.mem.unmark(_marks.mark_id(user, agent, None, None, step_id), user_id=user, agent_id=agent)
                mark = None
            else:
                mark = self.mem.mark_step(step_id, good=good, note=note, user_id=user, agent_id=agent)
            self._redraw_marks()
        self.say("unmarked the step" if mark is None else f"marked the step {mark.label}", "ok")
        return mark
