"""The PostgreSQL store's write path: one binary ``COPY`` per batch, in one transaction.

A batch is sent as PostgreSQL's binary ``COPY`` stream, encoded here: text as UTF-8, numbers
as network-order integers, the analysed terms in ``tsvector``'s binary form and the vector in
pgvector's (a dimension header and big-endian float32s). Compared with one ``INSERT`` per
memory carrying decimal vector text and ``tsvector`` input syntax, neither side formats or
parses a number, and the server receives the batch as one stream. The batch stays all or
nothing: the ``COPY`` and the namespace statistics commit together or not at all, and a
duplicate id or a value PostgreSQL refuses fails the whole batch with a memkit error.
"""

from __future__ import annotations

import json
import re
import struct
from collections import Counter
from decimal import Decimal
from typing import Any

from memkit._core._errors import InvalidInputError
from memkit._core._records import Record
from memkit._retrieval._keyword import analyze, analyze_many
from memkit.adapters._postgres._loop import load_psycopg

__all__ = ["SORTED_POSTINGS", "insert", "json_out", "jsonb_loads", "jsonb_text", "terms_binary", "text_in", "text_out"]

_COLUMNS = "id, user_id, agent_id, content, metadata, created_us, terms, terms_len"

#: Schema migration 5's postings trigger: schema 4's, with a batch's postings inserted in the
#: index's order. A batch's ~25 postings per memory then reach the b-tree as runs along its leaf
#: pages instead of one random descent each (a common term's postings of a batch are neighbours):
#: 205 -> 135 µs of server CPU per memory written at 100,000 memories (batches of 2,000).
SORTED_POSTINGS = """CREATE OR REPLACE FUNCTION memkit_postings_add() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO namespaces (user_id, agent_id)
        SELECT DISTINCT n.user_id, n.agent_id FROM added n
        WHERE NOT EXISTS (SELECT 1 FROM namespaces s WHERE s.user_id = n.user_id AND s.agent_id = n.agent_id)
        ORDER BY 1, 2
        ON CONFLICT DO NOTHING;
        INSERT INTO postings (ns, impact, term, seq)
        SELECT s.id, memkit_impact(cardinality(u.positions), n.terms_len), hashtextextended(u.lexeme, 0), n.seq
        FROM added n JOIN namespaces s ON s.user_id = n.user_id AND s.agent_id = n.agent_id
        CROSS JOIN LATERAL unnest(n.terms) AS u(lexeme, positions, weights)
        ORDER BY 1, 3, 2 DESC, 4 DESC;
        RETURN NULL;
    END $$"""
_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_TRAILER = struct.pack(">h", -1)
_STATS_ADD = (
    "INSERT INTO namespace_stats AS s (user_id, agent_id, count, terms) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT (user_id, agent_id) DO UPDATE SET count = s.count + excluded.count, terms = s.terms + excluded.terms"
)
# tsvector limits: a lexeme is at most 2047 bytes, a term keeps at most 256 positions.
_MAX_LEXEME_BYTES = 2_046
_MAX_POSITIONS = 256
# A term's positions 1..tf in tsvector's binary form (a uint16 count, then uint16 positions; weight D is 0).
_POSITIONS = [b""] + [struct.pack(f">H{n}H", n, *range(1, n + 1)) for n in range(1, _MAX_POSITIONS + 1)]
# Terms recur (a vocabulary follows Zipf's law): each is encoded once per process, up to this many.
_LEXEMES: dict[str, bytes | None] = {}
_LEXEMES_MAX = 200_000


def _lexeme(term: str) -> bytes | None:
    """``term`` as tsvector's binary lexeme (UTF-8, NUL-terminated), or ``None`` when too long to index."""
    found = _LEXEMES.get(term, b"")
    if found != b"":
        return found
    raw = term.encode("utf-8")
    lexeme = raw + b"\x00" if len(raw) <= _MAX_LEXEME_BYTES and b"\x00" not in raw else None
    if len(_LEXEMES) < _LEXEMES_MAX:
        _LEXEMES[term] = lexeme
    return lexeme


def terms_binary(text: str, terms: list[str] | None = None) -> tuple[bytes, int]:
    """``(tsvector in binary form, length)`` for ``text`` (whose analysis, :func:`analyze`, is
    ``terms`` when given): a term's uses as positions 1..tf.

    The same value :func:`memkit.adapters._postgres._sql.terms_vector` spells as tsvector input text.
    """
    if terms is None:
        terms = analyze(text)
    parts = [b""]
    kept = 0
    for term, tf in Counter(terms).items():
        lexeme = _lexeme(term)
        if lexeme is not None:
            parts.append(lexeme)
            parts.append(_POSITIONS[min(tf, _MAX_POSITIONS)])
            kept += 1
    parts[0] = struct.pack(">i", kept)
    return b"".join(parts), len(terms)


# A JSON string (skipped whole) or a number with a positive exponent, the form repr() gives floats
# from 1e16 up. jsonb keeps a number as numeric, digits and scale only: "1e+20" reads back as the
# integer 100000000000000000000, so such a float is written with its digits and a ".0" instead.
_BIG_FLOAT = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9]+(?:\.[0-9]+)?[eE]\+[0-9]+')


def _positional(match: re.Match[str]) -> str:
    token = match.group()
    if token[0] == '"':
        return token
    digits = format(Decimal(token), "f")
    return digits if "." in digits else digits + ".0"


# jsonb refuses a NUL in a string ("\u0000"), which every other store keeps. So NUL is stored as
# U+FFFF then "0", and U+FFFF itself (a noncharacter, rare in text) as U+FFFF then "1": one
# reversible spelling, the same for stored metadata and filter values, so equality still holds.
_MARK = "\uffff"
_NUL_IN_JSON = re.compile(r'\uffff|(?<!\\)((?:\\\\)*)\\u0000')
_MARKED = re.compile("\uffff([01])")


def _json_in(match: re.Match[str]) -> str:
    return _MARK + "1" if match.group() == _MARK else match.group(1) + _MARK + "0"


def jsonb_text(text: str) -> str:
    """JSON ``text`` as jsonb can hold it: every float spelled so that it reads back as a float, and
    NUL and U+FFFF inside strings spelled as above (:func:`json_out` reads it back)."""
    if "e+" in text:
        text = _BIG_FLOAT.sub(_positional, text)
    if "\\u0000" in text or _MARK in text:
        text = _NUL_IN_JSON.sub(_json_in, text)
    return text


def text_in(value: str) -> str:
    """A string as :func:`jsonb_text` spells it inside stored JSON (a filter value compared with one)."""
    if _MARK in value or "\x00" in value:
        return value.replace(_MARK, _MARK + "1").replace("\x00", _MARK + "0")
    return value


def text_out(value: str) -> str:
    """The string :func:`text_in` was given."""
    return _MARKED.sub(lambda m: "\x00" if m.group(1) == "0" else _MARK, value) if _MARK in value else value


def jsonb_loads(data: bytes | str) -> Any:
    """psycopg's reading of a jsonb value, for the text :func:`jsonb_text` wrote."""
    if isinstance(data, str):
        return json.loads(json_out(data))
    return json.loads(json_out(data.decode()) if b"\xef\xbf\xbf" in data else data)


def json_out(text: str) -> str:
    """The JSON text :func:`jsonb_text` was given, but for how floats are spelled."""
    return _MARKED.sub(lambda m: "\\u0000" if m.group(1) == "0" else _MARK, text) if _MARK in text else text


def _utf8(value: str, name: str) -> bytes:
    if "\x00" in value:
        raise InvalidInputError(f"{name} must not contain NUL characters (PostgreSQL cannot store them)")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{name} holds {value[exc.start:exc.end]!r}, which is not valid Unicode") from None


def _text(value: str, name: str) -> bytes:
    raw = _utf8(value, name)
    return struct.pack(">i", len(raw)) + raw


def _stream(records: list[Record], metadata: list[str], vectors: Any) -> tuple[bytes, Counter[tuple[str, str]]]:
    """The batch as one binary ``COPY`` stream (header, one tuple per record, trailer), and the
    analysed terms it adds per namespace."""
    fields = 9 if vectors is not None else 8
    rows = None
    head = b""
    if vectors is not None:
        import numpy as np

        dim = int(vectors.shape[1])
        head = struct.pack(">iHH", 4 + 4 * dim, dim, 0)
        rows = np.ascontiguousarray(vectors, dtype=">f4")
    lengths: Counter[tuple[str, str]] = Counter()
    analysed = analyze_many(r.content for r in records)
    out = [_HEADER]
    for i, r in enumerate(records):
        terms, length = terms_binary(r.content, analysed[i])
        lengths[(r.user_id, r.agent_id)] += length
        meta = _utf8(jsonb_text(metadata[i]), "metadata")
        out.append(struct.pack(">h", fields))
        out.append(_text(r.id, "id"))
        out.append(_text(r.user_id, "user_id"))
        out.append(_text(r.agent_id, "agent_id"))
        out.append(_text(r.content, "content"))
        # jsonb's binary form is a version byte (1), then the JSON text.
        out.append(struct.pack(">ib", len(meta) + 1, 1) + meta)
        out.append(struct.pack(">iqi", 8, r.created_us, len(terms)))
        out.append(terms)
        out.append(struct.pack(">ii", 4, length))
        if rows is not None:
            out.append(head + rows[i].tobytes())
    out.append(_TRAILER)
    return b"".join(out), lengths


async def _replace(cur: Any, records: list[Record]) -> None:
    """Delete the memories ``records`` replace (same id, same namespace), inside the caller's transaction."""
    wanted = {r.id: (r.user_id, r.agent_id) for r in records}
    ids = sorted(wanted)
    # One writer of an id at a time, each taking its ids in one order (no deadlock): the next one
    # waits for the first's commit, then its statements see the row that one wrote and replace it.
    await cur.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(i, 0)) FROM (SELECT i FROM unnest(%s::text[]) AS u(i)"
        " ORDER BY i) AS s",
        (ids,),
    )
    await cur.execute("SELECT id, user_id, agent_id FROM memories WHERE id = ANY(%s)", (ids,))
    held = await cur.fetchall()
    if any(wanted[memory_id] != (user, agent) for memory_id, user, agent in held):
        raise InvalidInputError("a memory with one of these ids already exists (in another namespace)")
    if not held:
        return
    await cur.execute(
        "DELETE FROM memories WHERE id = ANY(%s) RETURNING user_id, agent_id, terms_len", ([h[0] for h in held],)
    )
    gone: Counter[tuple[str, str]] = Counter()
    terms: Counter[tuple[str, str]] = Counter()
    for user, agent, length in await cur.fetchall():
        gone[(user, agent)] += 1
        terms[(user, agent)] += length
    await cur.executemany(
        "UPDATE namespace_stats SET count = count - %s, terms = terms - %s WHERE user_id = %s AND agent_id = %s",
        [(n, terms[ns], *ns) for ns, n in sorted(gone.items())],
    )


async def insert(
    conn: Any, records: list[Record], metadata: list[str], vectors: Any, replace: bool = False,
    recalls: tuple[str, list[tuple[Any, ...]]] | None = None,
) -> None:
    """Write ``records`` (their metadata as JSON text, their vectors or ``None``) in one transaction;
    ``replace``: those whose ids a memory of the same namespace holds take its place; ``recalls`` (an
    insert statement and its rows): those recalls in the same transaction, so an import's steps never
    commit without them.

    Raises :class:`memkit.InvalidInputError` when an id exists already (without ``replace``, or in
    another namespace) or PostgreSQL refuses a value; nothing of the batch is written then.
    """
    psycopg, _ = load_psycopg()
    data, lengths = _stream(records, metadata, vectors)
    per_namespace = Counter((r.user_id, r.agent_id) for r in records)
    columns = _COLUMNS + (", embedding" if vectors is not None else "")
    try:
        async with conn.transaction(), conn.cursor() as cur:
            if replace:
                await _replace(cur, records)
            async with cur.copy(f"COPY memories ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
                await copy.write(data)
            # Last, so that writers of one namespace insert side by side and queue only for this
            # row update before their commits; namespaces in one order in every writer, so two
            # batches never wait for each other in a cycle.
            await cur.executemany(_STATS_ADD, [(u, a, n, lengths[(u, a)])
                                               for (u, a), n in sorted(per_namespace.items())])
            if recalls is not None and recalls[1]:
                await cur.executemany(recalls[0], recalls[1])
    except psycopg.errors.UniqueViolation as exc:
        detail = exc.diag.message_detail
        what = "recall" if exc.diag.table_name == "recalls" else "memory"
        raise InvalidInputError(f"a {what} with one of these ids already exists ({detail})") from None
    except (psycopg.errors.UntranslatableCharacter, psycopg.errors.CharacterNotInRepertoire) as exc:
        raise InvalidInputError(f"PostgreSQL cannot store this text: {exc}") from None
