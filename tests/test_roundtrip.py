"""Export -> import is lossless between any two backends (real servers): every ordered pair of memory,
SQLite, PostgreSQL, FalkorDB and Neo4j, the same backend included.

Each backend stores a few memories whose metadata holds the numbers JSON stores differently
(floats spelled with an exponent, the largest and smallest doubles, 0.1, 64-bit integers at both
ends), text in several scripts (emoji, right-to-left, combining marks) in keys, values, content and
ids, NUL and U+FFFF in keys and values, and nesting. Its export must give back exactly what was
written (a float stays a float: 1e20 once came back from PostgreSQL as the integer
100000000000000000000 and the export then failed to import), and importing that file into each
backend and exporting again must give the same lines. The one documented exception: PostgreSQL's
numbers have no negative zero, so -0.0 reads back as 0.0 from it (README, "Errors and limits").
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memkit
from memkit.testing import FalkorDBServer, PostgresServer

BACKENDS = ("memory", "sqlite", "postgres", "falkordb", "neo4j")

FLOATS = {"big": 1e20, "w": 3e16, "max": 1e308, "tiny": 5e-324, "negzero": -0.0, "tenth": 0.1, "neg": -1.5e300,
          "whole": 123.0, "edge": 9999999999999998.0, "small": 1e-7}
INTS = {"imax": 2**63 - 1, "imin": -(2**63 - 1), "lowest": -(2**63), "zero": 0}
TEXT = {"emoji": "🧬🔬 DNA", "rtl": "שלום עולם مرحبا", "combining": "e\u0301 n\u0303 \u0915\u093f", "🧬 key": "value",
        "quotes": "\"'\\ </script>", "newline": "a\nb\tc", "blank": "",
        # NUL is text in metadata on every backend (PostgreSQL and FalkorDB spell it with U+FFFF)
        "nul": "a\x00b", "nul\x00key": "\x00", "mark": "\uffff0 \uffff1 \uffff"}


def _metadata(n: int) -> dict[str, Any]:
    return {**FLOATS, **INTS, **TEXT, "n": n, "nested": {"list": [1e20, -0.0, 3e16, {"deep": 1e308}], "ok": True,
                                                           "none": None}}


def _canonical(value: Any, negzero: bool) -> str:
    """JSON text that tells 1e+20 from 100000000000000000000 and -0.0 from 0.0 (unless ``negzero`` is
    False: the value went through PostgreSQL) and ignores key order (jsonb orders keys its own way)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if negzero else text.replace("-0.0", "0.0")


@pytest.fixture
def url_of(tmp_path: Path, postgres_server: PostgresServer, falkordb_server: FalkorDBServer,
           neo4j_uri: str) -> Iterator[Any]:
    tag = uuid.uuid4().hex[:8]
    urls = {
        "memory": "memory://",
        "sqlite": f"sqlite:///{tmp_path / 'roundtrip.db'}",
        "postgres": postgres_server.url(f"roundtrip_{tag}"),
        "falkordb": falkordb_server.url(f"roundtrip-{tag}"),
        "neo4j": neo4j_uri,
    }
    yield urls.__getitem__


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_export_import_is_lossless_between_every_pair_of_backends(url_of: Any, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    stores = {name: memkit.open(url_of(name)) for name in BACKENDS}
    try:
        exported: dict[str, list[dict[str, Any]]] = {}
        for name, mem in stores.items():
            user = f"rt {tag} {name} 🧬 שלום"
            written = [
                {"id": f"{name}-{n}-{tag}-é🧬", "user_id": user, "agent_id": "agent e\u0301", "metadata": _metadata(n),
                 "content": f"memory {n}: BRCA1 🧬 שלום e\u0301 مرحبا"}
                for n in range(3)
            ]
            mem.add_many(written)
            path = tmp_path / f"{name}.jsonl"
            memkit.export_jsonl(mem, path, user_id=user, progress=False)
            rows = _rows(path)
            keeps_sign = name != "postgres"
            assert sorted(_canonical({k: r[k] for k in written[0]}, keeps_sign) for r in rows) == sorted(
                _canonical(w, keeps_sign) for w in written), name
            exported[name] = rows
        for source, rows in exported.items():
            for target, mem in stores.items():
                # Ids and users made unique per target, so a backend can import its own export too.
                moved = [{**r, "id": f"{r['id']}~{target}", "user_id": f"{r['user_id']}~{target}"} for r in rows]
                path = tmp_path / f"{source}-to-{target}.jsonl"
                path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in moved), encoding="utf-8")
                assert memkit.import_jsonl(mem, path, progress=False) == len(moved)
                back = tmp_path / f"{source}-to-{target}-back.jsonl"
                memkit.export_jsonl(mem, back, user_id=moved[0]["user_id"], progress=False)
                keeps_sign = "postgres" not in (source, target)
                assert sorted(_canonical(r, keeps_sign) for r in _rows(back)) == sorted(
                    _canonical(r, keeps_sign) for r in moved), (source, target)
    finally:
        for mem in stores.values():
            mem.close()
