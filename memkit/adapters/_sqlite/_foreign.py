"""A store file that SQLite cannot read: what it is, said in the error, and the TinyDB records in it.

Agents built on the seed's first ``MemoryTools`` keep their key-value scratchpad in a TinyDB JSON
file at the same default path (``data/memory.db``); memkit names such a file instead of passing on
SQLite's "file is not a database", and :func:`memkit.tools.import_tinydb` copies its records.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from memkit._core._errors import ConfigError

__all__ = ["not_a_database", "tinydb_records"]

_SQLITE_MAGIC = b"SQLite format 3\x00"


def tinydb_records(path: str | os.PathLike[str]) -> list[tuple[str, str, dict[str, Any]]] | None:
    """``(table, document id, record)`` for every document of the TinyDB JSON file at ``path``, or
    ``None`` when the file is not one (TinyDB's layout: ``{"table": {"1": {...}, ...}, ...}``)."""
    try:
        data = json.loads(Path(path).read_bytes())
    except (OSError, ValueError, RecursionError):  # ValueError covers bad JSON and bad UTF-8
        return None
    if not isinstance(data, dict) or not all(isinstance(table, dict) for table in data.values()):
        return None
    records: list[tuple[str, str, dict[str, Any]]] = []
    for table, documents in data.items():
        for doc_id, record in documents.items():
            if not (doc_id.isascii() and doc_id.isdigit() and isinstance(record, dict)):
                return None
            records.append((table, doc_id, record))
    return records


def not_a_database(path: str, problem: Exception) -> ConfigError:
    """The error for ``path``, which SQLite refused with ``problem``, saying what the file is."""
    try:
        with open(path, "rb") as file:
            head = file.read(len(_SQLITE_MAGIC))
    except OSError:
        head = b""
    records = None if head == _SQLITE_MAGIC else tinydb_records(path)
    if records is None:
        return ConfigError(f"{path!r} is not a usable memkit database: {problem}")
    moved = f"{path}.tinydb.json"
    return ConfigError(
        f"{path!r} is a TinyDB JSON file ({len(records)} records), as agents built on the seed's first"
        " MemoryTools keep, not a SQLite database. Move it aside and import its key-value records into"
        f" a memkit store: mv {shlex.quote(path)} {shlex.quote(moved)} && memkit --url"
        f" {shlex.quote(f'sqlite:///{path}')} import --tinydb {shlex.quote(moved)}"
        " (or memkit.tools.import_tinydb)"
    )
