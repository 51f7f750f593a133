"""Move whole stores in and out as JSON Lines, and import the seed framework's history files.

One JSON object per line: ``id, user_id, agent_id, content, metadata, created_at``
(ISO 8601, UTC, microseconds). Exporting and importing into an empty store gives
back the same records: same ids, namespaces, content, metadata and times.

Recalls (on stores that keep them) follow the memories, one ``{"recall": {...}}``
line each, oldest first; they come back byte for byte. Marks (on stores that keep them)
come last, one ``{"mark": {...}}`` line each.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memkit._core._errors import InvalidInputError
from memkit._core._models import NewMemory
from memkit._core._port import (
    MemoryProvider,
    SupportsAddMany,
    SupportsExport,
    SupportsMarks,
    SupportsRecalls,
    SupportsStats,
)
from memkit._core._recalls import Mark, Recall
from memkit._core._records import from_us, trace_record
from memkit._recall import _marks
from memkit._recall import _recording as _recall
from memkit._sync import Memory, call, provider_of

__all__ = ["export_jsonl", "import_history", "import_jsonl"]

_FIELDS = ("id", "user_id", "agent_id", "content", "metadata", "created_at")


async def _export(
    provider: MemoryProvider, path: Path, user_id: str | None, agent_id: str | None, progress: bool
) -> int:
    if not isinstance(provider, SupportsExport):
        raise NotImplementedError(f"{provider!r} cannot list its records (no export())")
    bar = None
    if progress:
        from tqdm.auto import tqdm

        total = (await provider.stats()).memories if isinstance(provider, SupportsStats) else None
        bar = tqdm(total=None if user_id or agent_id else total, desc="export", unit="mem")
    count = 0
    tmp = path.with_name(path.name + ".part")
    try:
        with tmp.open("w", encoding="utf-8") as out:
            async for item in provider.export(user_id, agent_id):
                created = item.created_at.isoformat(timespec="microseconds") if item.created_at else None
                row = {
                    "id": item.id, "user_id": item.user_id, "agent_id": item.agent_id,
                    "content": item.content, "metadata": item.metadata, "created_at": created,
                }
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
                if bar is not None:
                    bar.update(1)
            if isinstance(provider, SupportsRecalls):
                for recall in await provider.recalls(user_id=user_id, agent_id=agent_id):
                    out.write('{"recall":' + _recall.dumps(recall) + "}\n")
                    count += 1
            if isinstance(provider, SupportsMarks):
                for mark in await provider.marks(user_id=user_id, agent_id=agent_id):
                    out.write('{"mark":' + _marks.dumps(mark) + "}\n")
                    count += 1
        os.replace(tmp, path)  # a half-written file never takes the target's name
    finally:
        tmp.unlink(missing_ok=True)
        if bar is not None:
            bar.close()
    return count


def export_jsonl(
    mem: MemoryProvider | Memory,
    path: str | os.PathLike[str],
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    progress: bool = True,
) -> int:
    """Write every record (traces included), oldest first, then the recalls, to ``path``; returns how many lines.

    ``user_id``/``agent_id`` narrow the export to matching namespaces.

    Examples
    --------
    >>> memkit.export_jsonl(mem, "backup.jsonl")   # doctest: +SKIP
    """
    return call(mem, _export, Path(path), user_id, agent_id, progress)


def _read_jsonl(path: Path) -> tuple[list[NewMemory], list[Recall], list[Mark]]:
    items: list[NewMemory] = []
    recalls: list[Recall] = []
    marks: list[Mark] = []
    try:
        f = path.open("rb")  # lines decoded one by one: a bad byte is named by its line
    except OSError as exc:
        raise InvalidInputError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    with f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidInputError(f"{path}:{number} is not UTF-8 text (byte {exc.start + 1})") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"{path}:{number} is not JSON: {exc}") from None
            except RecursionError:
                raise InvalidInputError(f"{path}:{number} is JSON nested deeper than Python can read") from None
            if isinstance(row, dict) and set(row) == {"recall"}:
                try:
                    recalls.append(Recall.model_validate(row["recall"]))
                except ValidationError as exc:
                    raise InvalidInputError(f"{path}:{number} is not a valid recall: {exc}") from None
                continue
            if isinstance(row, dict) and set(row) == {"mark"}:
                try:
                    marks.append(Mark.model_validate(row["mark"]))
                except ValidationError as exc:
                    raise InvalidInputError(f"{path}:{number} is not a valid mark: {exc}") from None
                continue
            if not isinstance(row, dict) or not {"user_id", "agent_id", "content"} <= row.keys():
                raise InvalidInputError(f"{path}:{number} needs user_id, agent_id and content")
            unknown = set(row) - set(_FIELDS)
            if unknown:
                raise InvalidInputError(f"{path}:{number} has unknown fields: {', '.join(sorted(unknown))}")
            try:
                created = datetime.fromisoformat(row["created_at"]) if row.get("created_at") else None
            except (TypeError, ValueError):
                raise InvalidInputError(f"{path}:{number}: created_at is not an ISO 8601 time") from None
            items.append(
                NewMemory(
                    id=row.get("id"), user_id=row["user_id"], agent_id=row["agent_id"],
                    content=row["content"], metadata=row.get("metadata"), created_at=created,
                )
            )
    return items, recalls, marks


def import_jsonl(mem: MemoryProvider | Memory, path: str | os.PathLike[str], *, progress: bool = True) -> int:
    """Load an :func:`export_jsonl` file; returns how many records were written.

    All or nothing: the whole file is validated and written in one ``add_many``, so a bad
    line or an id the store already holds raises :class:`~memkit.InvalidInputError` and
    writes nothing. Recalls and marks are checked the same way first and written after the memories.
    """
    provider = provider_of(mem)
    if not isinstance(provider, SupportsAddMany):
        raise NotImplementedError(f"{provider!r} cannot import (no add_many())")
    items, recalls, marks = _read_jsonl(Path(path))
    keeper = provider if isinstance(provider, SupportsRecalls) else None
    marker = provider if isinstance(provider, SupportsMarks) else None
    if marks:
        if marker is None:
            raise NotImplementedError(f"{provider!r} cannot keep the file's marks (no put_marks())")
        _marks.checked_marks(marks)
    if recalls:
        if keeper is None:
            raise NotImplementedError(f"{provider!r} cannot keep the file's recalls (no add_recalls())")
        _recall.checked_recalls(recalls)
    return call(provider, _import, items, recalls, marks, progress)


async def _import(
    provider: MemoryProvider, items: list[NewMemory], recalls: list[Recall], marks: list[Mark],
    progress: bool,
) -> int:
    """Write what :func:`import_jsonl` read and checked: no recall the store already holds, then the
    memories in one ``add_many``, then the recalls and the marks."""
    keeper = provider if isinstance(provider, SupportsRecalls) else None
    if recalls and keeper is not None:
        for recall in recalls:
            if await keeper.get_recall(recall.id) is not None:
                raise InvalidInputError(f"the store already holds recall {recall.id!r}")
    written = len(await _add_many(provider, items, progress))
    if recalls and keeper is not None:
        written += await keeper.add_recalls(recalls)
    if marks and isinstance(provider, SupportsMarks):
        written += await provider.put_marks(marks)
    return written


async def _add_many(provider: MemoryProvider, items: list[NewMemory], progress: bool) -> list[str]:
    if not isinstance(provider, SupportsAddMany):
        raise NotImplementedError(f"{provider!r} cannot import (no add_many())")
    return await provider.add_many(items, progress=progress)


def import_history(
    mem: MemoryProvider | Memory,
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    workflow_id: str,
    agent_id: str,
    user_id: str = "system",
    run_id: str | None = None,
    progress: bool = False,
) -> list[str]:
    """Store a seed-framework ``ExecutionHistory.save_to_file`` JSON as traces of one workflow.

    Each item becomes the record ``add_trace`` would have written (same content, metadata
    and redaction), with ``step_index`` = its position and the store time = its
    ``timestamp``, so :func:`memkit.frames.traces_frame` replays it in order. All items
    are validated first and written in one ``add_many`` (all or nothing).
    """
    from memkit.traces import ExecutionHistory

    if isinstance(source, Mapping):
        history = ExecutionHistory.from_dict(source)
    else:
        try:
            history = ExecutionHistory.load_from_file(source)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{source} is not JSON: {exc}") from None
    provider = provider_of(mem)
    if not isinstance(provider, SupportsAddMany):
        raise NotImplementedError(f"{provider!r} cannot import (no add_many())")
    items: list[NewMemory] = []
    for index, item in enumerate(history.items):
        data = item.to_dict()
        data["step_index"] = index
        if run_id is not None:
            data["run_id"] = run_id
        record = trace_record(agent_id, workflow_id, data, user_id)
        stamp = item.timestamp
        created = from_us(round(stamp * 1e6)) if isinstance(stamp, (int, float)) else None
        items.append(
            NewMemory(
                content=record.content, user_id=record.user_id, agent_id=record.agent_id,
                metadata=record.metadata, created_at=created,
            )
        )
    return call(provider, _add_many, items, progress)
