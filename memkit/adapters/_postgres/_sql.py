"""The PostgreSQL store's statements: metadata filters compiled to SQL, and the retrieval legs.

Nothing a caller supplies is ever part of a statement's text: values (texts, ids, numbers,
filter paths and values, vectors) travel as parameters, and the only identifiers spliced
in come from fixed sets here. Every statement that reads a namespace names ``user_id`` and
``agent_id`` first, so PostgreSQL reads it through the namespace's own index entries.

The keyword leg scores with memkit's BM25 (:mod:`memkit._retrieval._keyword`) inside the database:
memories are stored with memkit's own analysis as a ``tsvector`` (a term's positions
``1..tf`` count its uses), the keyword postings (:mod:`memkit.adapters._postgres._keyword`)
find the namespace's memories that hold any query term, and the score sums
``idf * tf (k1 + 1) / (tf + k1 (1 - b + b len / avglen))`` with the namespace's N, average
length and document frequencies, so it ranks as SQLite does.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from memkit._core._filters import Condition
from memkit._core._records import Record
from memkit._retrieval._config import dense_path
from memkit._retrieval._keyword import K1, B, analyze
from memkit.adapters._postgres._writes import text_in, text_out
from memkit.adapters._sqlbase import LISTED, Dialect, filter_sql, listed_bounds

__all__ = [
    "COLUMNS", "DENSE_EXACT_MAX", "HALFVEC_SLACK", "HEADS_SQL", "KINDS", "POSTGRES", "SEGMENT_FLOOR", "SEGMENT_SPREAD",
    "any_query", "check_dim", "check_kind", "dense_statements", "filtered_exactly", "gaps_statement",
    "graph_expression", "int_array", "listed_values", "neighbours", "row_record", "segment_limits", "select",
    "terms_vector",
]

COLUMNS = "m.seq, m.id, m.user_id, m.agent_id, m.content, m.metadata, m.created_us"


def int_array(values: Iterable[int]) -> str:
    """``values`` as a ``bigint[]`` literal, bound as one text parameter and cast (``%s::bigint[]``):
    psycopg adapts a list element by element in Python, 1.1 against 0.24 ms for 2,000 seqs, and a
    search sends several such lists."""
    return "{" + ",".join(map(str, map(int, values))) + "}"


def row_record(row: tuple[Any, ...]) -> Record:
    """A memory read with :data:`COLUMNS`."""
    metadata = row[5]
    return Record(id=row[1], user_id=row[2], agent_id=row[3], content=row[4],
                  metadata=metadata if isinstance(metadata, dict) else {}, created_us=row[6])

#: Namespaces up to this size are scored exactly by the dense leg (every vector of the namespace,
#: read through its index entries); larger ones go through the HNSW index (iterative scan).
DENSE_EXACT_MAX = 5_000

# tsvector limits: a lexeme is at most 2047 bytes, a term keeps at most 256 positions.
_MAX_LEXEME_BYTES = 2_046
_MAX_POSITIONS = 256


def _quoted(term: str) -> str:
    """A lexeme in tsvector/tsquery input syntax: quoted, with quotes and backslashes escaped."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def _indexable(term: str) -> bool:
    return len(term.encode("utf-8")) <= _MAX_LEXEME_BYTES


def terms_vector(text: str) -> tuple[str, int]:
    """``(tsvector input, length)`` for ``text``: memkit's analysis, a term's uses as positions 1..tf."""
    terms = analyze(text)
    counts = Counter(t for t in terms if _indexable(t))
    vector = " ".join(
        f"{_quoted(term)}:{','.join(map(str, range(1, min(tf, _MAX_POSITIONS) + 1)))}" for term, tf in counts.items()
    )
    return vector, len(terms)


def any_query(terms: list[str]) -> str:
    """A tsquery that matches documents holding any of ``terms``."""
    return " | ".join(_quoted(t) for t in terms)


def query_terms(terms: list[str]) -> list[str]:
    """The query terms an index can hold (longer ones match nothing)."""
    return [t for t in terms if _indexable(t)]


# -- metadata filters ---------------------------------------------------------------------

def _number(value: int | float) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))


#: jsonb: a path is a text array; a number is compared as numeric (bound as its exact text) and a
#: string under the "C" collation, by code point as UTF-8 bytes order, spelled as stored (NUL and
#: U+FFFF as in :func:`memkit.adapters._postgres._writes.jsonb_text`).
POSTGRES = Dialect(
    mark="%s", true="true", false="false",
    type_of="jsonb_typeof(m.metadata #> %s)",
    types={"bool": "'boolean'", "number": "'number'", "string": "'string'"},
    values={"bool": "(m.metadata #> %s)::boolean", "number": "(m.metadata #> %s)::numeric",
            "string": '(m.metadata #>> %s) COLLATE "C"'},
    operands={"bool": "%s::boolean", "number": "%s::numeric", "string": '%s::text COLLATE "C"'},
    path=lambda cond: list(cond.path),
    binds={"number": _number, "string": text_in},
    # memories_metadata (GIN, jsonb_path_ops) serves it: a 5% filter's rows without the namespace's.
    contains="m.metadata @> %s::jsonb",
)


# The expression the ``memories_listed`` index holds (spelled as it is there, or PostgreSQL does not use it).
LISTED_SQL = f"((m.metadata ->> '{LISTED}') COLLATE \"C\")"

Fetch = Callable[[str, list[Any]], Awaitable[list[tuple[Any, ...]]]]


def _seen(where: str, bound: str, cap: str) -> str:
    """A recursive CTE ``seen(v, n)``: the distinct :data:`LISTED` values of the namespace's memories
    that pass ``where``, ascending from the one bound ``lo`` and within ``bound``, ``cap`` of them at most."""

    def step(after: str) -> str:
        return (
            f"SELECT {LISTED_SQL} FROM memories m WHERE m.user_id = %s AND m.agent_id = %s"  # noqa: S608
            f" AND {LISTED_SQL} IS NOT NULL AND {LISTED_SQL} {after}{bound} AND {where} ORDER BY {LISTED_SQL} LIMIT 1"
        )

    return (
        f"seen(v, n) AS (SELECT ({step('>= %s')}), 1"  # noqa: S608
        f" UNION ALL SELECT ({step('> seen.v')}), n + 1 FROM seen WHERE v IS NOT NULL AND n < {cap})"
    )


async def listed_values(
    fetch: Fetch, user_id: str, agent_id: str, where: str, params: list[Any], lo: str, hi: str | None, limit: int
) -> list[str]:
    """The distinct :data:`LISTED` values in ``[lo, hi)`` (``hi`` ``None``: from ``lo`` on) of the
    namespace's memories that pass ``where``, ascending, at most ``limit``: one index seek a value."""
    bound, bounds = ("", []) if hi is None else (f" AND {LISTED_SQL} < %s", [text_in(hi)])
    sql = f"WITH RECURSIVE {_seen(where, bound, '%s')} SELECT v FROM seen WHERE v IS NOT NULL"  # noqa: S608
    once = [*bounds, *params]
    rows = await fetch(sql, [user_id, agent_id, text_in(lo), *once, user_id, agent_id, *once, min(limit, 2**62)])
    return [text_out(row[0]) for row in rows]


_NEWEST = "ORDER BY m.created_us DESC, m.seq DESC"
#: How many of the namespace's newest memories a listing over several :data:`LISTED` values walks,
#: per memory asked for, before it asks the metadata index instead: a filter one memory in a hundred
#: passes is found by the walk; a rarer one is found through the index, whose rows are then sorted.
WALK = 100


async def select(
    fetch: Fetch, user_id: str, agent_id: str, conditions: tuple[Condition, ...], limit: int, offset: int
) -> list[Record]:
    """One namespace's memories that pass the filters, newest first."""
    where, params = filter_sql(conditions, POSTGRES)
    namespace = "m.user_id = %s AND m.agent_id = %s"
    if (bounds := listed_bounds(conditions)) is None:
        sql = f"SELECT {COLUMNS} FROM memories m WHERE {namespace} AND {where} {_NEWEST} LIMIT %s OFFSET %s"  # noqa: S608
        return [row_record(r) for r in await fetch(sql, [user_id, agent_id, *params, limit, offset])]
    return [row_record(r) for r in await fetch(*_listed(user_id, agent_id, where, params, bounds, limit, offset))]


def _listed(
    user_id: str, agent_id: str, where: str, params: list[Any], bounds: tuple[str, str], limit: int, offset: int
) -> tuple[str, list[Any]]:
    """The statement of a listing bounded to a range of :data:`LISTED` (a LangGraph namespace and the
    ones under it). Left to the planner, it read every memory of the range through the metadata
    index and sorted them, its estimate of the ``@>`` tests being far too low, and a generic plan
    did the same for the filter-only listing it had walked. So the order is fixed here, each walk
    newest first and stopping once the page is full: a range holding one path walks that path's
    entries of ``memories_listed``; a range holding several walks the namespace, for at most
    :data:`WALK` memories per memory asked for, and only a filter rarer than that is left to the
    planner. At most one of the three parts gives rows. The limits are written as numbers so that a
    prepared statement's plan knows them."""
    limit, offset = min(int(limit), 2**62), min(int(offset), 2**62)
    want = min(limit + offset, 2**62)
    page = f"LIMIT {limit} OFFSET {offset}"
    namespace = "m.user_id = %s AND m.agent_id = %s"
    sql = (
        f"WITH RECURSIVE {_seen('true', f' AND {LISTED_SQL} < %s', '2')},"  # noqa: S608
        " paths AS MATERIALIZED (SELECT min(v) AS one, count(v) AS many FROM seen),"
        f" walked AS MATERIALIZED (SELECT {COLUMNS} FROM (SELECT * FROM memories m WHERE {namespace} {_NEWEST}"
        f" LIMIT {min(WALK * want, 2**62)}) m WHERE (SELECT many FROM paths) > 1 AND {where} {_NEWEST} LIMIT {want})"
        # OFFSET 0 keeps the outer filters out of the walk, so the planner cannot trade it for the
        # metadata index
        f" (SELECT {COLUMNS} FROM (SELECT * FROM memories m WHERE {namespace} AND {LISTED_SQL} IS NOT NULL"
        f" AND {LISTED_SQL} = (SELECT one FROM paths) {_NEWEST} OFFSET 0) m"
        f" WHERE (SELECT many FROM paths) = 1 AND {where} {_NEWEST} {page})"
        f" UNION ALL (SELECT * FROM walked m WHERE (SELECT count(*) FROM walked) >= {want} {_NEWEST} {page})"
        f" UNION ALL (SELECT {COLUMNS} FROM memories m WHERE (SELECT many FROM paths) > 1"
        f" AND (SELECT count(*) FROM walked) < {want} AND {namespace} AND {where} {_NEWEST} {page})"
    )
    lo, hi = text_in(bounds[0]), text_in(bounds[1])
    ns = [user_id, agent_id]
    return sql, [*ns, lo, hi, *ns, hi, *ns, *params, *ns, *params, *ns, *params]


# -- the keyword leg ----------------------------------------------------------------------

# The BM25 of every memory of the namespace that holds a query term and passes the filters, in one
# pass over the memories holding any query term: those rows also give each term's document
# frequency in the namespace (counted as SQLite's index counts them, filters or not), and
# namespace_stats gives N and the average length. Only the query terms' entries of each tsvector
# are unnested: setweight marks them, ts_filter keeps them. The idf is FTS5's, floored as
# memkit._retrieval._keyword.KeywordIndex.top floors it.
KEYWORD_SQL = """
WITH stats AS (
    SELECT count::float8 AS n, CASE WHEN terms > 0 THEN terms::float8 / count ELSE 1 END AS avglen
    FROM namespace_stats WHERE user_id = %s AND agent_id = %s AND count > 0
),
hits AS MATERIALIZED (
    SELECT m.seq, m.created_us, m.terms_len, ({where}) AS passes,
           ts_filter(setweight(m.terms, 'A', %s::text[]), '{{a}}') AS found
    FROM memories m
    WHERE m.user_id = %s AND m.agent_id = %s AND m.seq IN (
        SELECT p.seq FROM postings p JOIN namespaces s ON s.id = p.ns
        WHERE s.user_id = %s AND s.agent_id = %s
          AND p.term IN (SELECT hashtextextended(x, 0) FROM unnest(%s::text[]) AS x))
      AND m.terms @@ %s::tsquery  -- two terms may share a hash: the tsvector decides
),
postings AS MATERIALIZED (
    SELECT h.seq, h.created_us, h.terms_len, h.passes, u.lexeme, cardinality(u.positions) AS tf
    FROM hits h CROSS JOIN LATERAL unnest(h.found) AS u(lexeme, positions, weights)
),
w AS (
    SELECT d.lexeme, CASE WHEN l.x > 0 THEN l.x ELSE 1e-6 END AS idf
    FROM (SELECT lexeme, count(*) AS df FROM postings GROUP BY lexeme) d CROSS JOIN stats
    CROSS JOIN LATERAL (SELECT ln((stats.n - d.df + 0.5) / (d.df + 0.5)) AS x) l
)
SELECT p.seq, p.created_us,
       sum(w.idf * p.tf * %s::float8 / (p.tf + %s::float8 * (1 - %s::float8 + %s::float8 * p.terms_len / stats.avglen)))
           AS score
FROM postings p JOIN w ON w.lexeme = p.lexeme CROSS JOIN stats
WHERE p.passes
GROUP BY p.seq, p.created_us
ORDER BY score DESC, p.created_us DESC, p.seq DESC
LIMIT %s
"""


#: The opening characters of candidate memories of one namespace: enough for a chat line's
#: "[timestamp] Speaker Name:" prefix (see :func:`memkit._retrieval._keyword.speaker_terms`).
HEADS_SQL = (
    "SELECT seq, left(content, 200) FROM memories WHERE user_id = %s AND agent_id = %s AND seq = ANY(%s::bigint[])"
)


def keyword_statement(
    user_id: str, agent_id: str, terms: list[str], conditions: tuple[Condition, ...], limit: int,
) -> tuple[str, list[Any]]:
    """The keyword leg's statement: ``(seq, created_us, bm25)`` rows, best first, ties newest first.
    ``terms`` are the analysed query terms an index can hold (:func:`query_terms`)."""
    where, params = filter_sql(conditions, POSTGRES)
    return KEYWORD_SQL.format(where=where), [
        user_id, agent_id, *params, terms, user_id, agent_id, user_id, agent_id, terms, any_query(terms),
        K1 + 1.0, K1, B, B, limit,
    ]


# -- the dense leg ------------------------------------------------------------------------

#: How many of a deep leg's candidates a segment of the vector index is asked for: its share of the
#: memories, ``SEGMENT_SPREAD`` times over, and at least ``SEGMENT_FLOOR`` (never more than the leg's
#: depth): a segment holding 1% of the memories holds about 1% of the nearest ones.
SEGMENT_SPREAD = 4
SEGMENT_FLOOR = 20


def segment_limits(depth: int, segments: Sequence[int], top: int) -> list[int]:
    """How many rows to ask each segment (ending at ``segments``) for, for ``depth`` candidates, when
    the memories run up to ``seq`` ``top``."""
    total = max([top, *segments])
    return [min(depth, max(SEGMENT_FLOOR, math.ceil(SEGMENT_SPREAD * depth * (hi - lo) / total)))
            for lo, hi in zip([0, *segments], segments, strict=False)]


#: The kinds of graph a segment of the vector index is built as. ``vector``: over the full vectors
#: (every segment before schema 6). ``halfvec``: over the vectors rounded to 16-bit floats; its
#: candidates are then scored with the full vectors, so only which memories the walk finds can
#: differ, never their scores.
KINDS = ("vector", "halfvec")


#: A ``halfvec`` graph's segment yields this many rows more than it is asked for (its search list
#: stays the same): 16-bit floats cannot tell apart memories whose cosines differ by less than
#: about 1e-3 (near-duplicates: "bake 3" and "bake 4"), so the walk orders them by ``seq``, and the
#: full vectors then pick among a few more of them.
HALFVEC_SLACK = 10


def check_kind(kind: str) -> str:
    """``kind`` if it is one of :data:`KINDS`."""
    if kind not in KINDS:
        raise ValueError(f"a vector index segment is one of {KINDS}, not {kind!r}")
    return kind


def check_dim(dim: int) -> int:
    """``dim`` if it is a vector dimension pgvector takes (an ``int``: it is spliced into statements)."""
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 < dim <= 16_000:
        raise ValueError(f"vector dimension must be an int in 1..16000, got {dim!r}")
    return dim


def graph_expression(kind: str, dim: int) -> str:
    """What a segment of ``kind`` orders by: the indexed expression, the query's vector being ``v.q``
    (the cosine distance, which orders as the inner product does for memkit's unit vectors)."""
    if check_kind(kind) == "halfvec":
        return f"m.embedding::halfvec({check_dim(dim)}) <=> v.q::halfvec({check_dim(dim)})"
    return "m.embedding <=> v.q"


def dense_statements(
    user_id: str, agent_id: str, conditions: tuple[Condition, ...], limit: int, exact: bool, vector: Any,
    segments: Sequence[int] = (), limits: Sequence[int] = (), kinds: Sequence[str] = (), dim: int = 0,
) -> list[tuple[str, list[Any], int]]:
    """``(statement, parameters, rows asked)`` whose rows together hold the namespace's ``limit``
    nearest memories to ``vector`` that pass the filters: ``(seq, created_us, cosine)`` rows (the
    caller keeps the best).

    ``exact`` orders every vector of the namespace by the inner product (no index serves it): one
    statement. Otherwise one statement per segment of the vector index (``segments``: their ends,
    ``kinds``: what each one's graph is over, default ``vector``, see
    :mod:`memkit.adapters._postgres._index`), asked for ``limits`` rows each (default ``limit``),
    each served in its range of ``seq`` by the order its graph serves (the range is spliced as
    ``int`` constants so the planner can prove the segment's predicate), and one for the memories
    written after the last segment, which no index holds yet, scored exactly through the
    namespace's ``seq`` index. The cosine a row carries is always the full vectors' (a ``halfvec``
    graph only picks the rows); every order is the cosine's for memkit's unit vectors.
    """
    where, params = filter_sql(conditions, POSTGRES)
    head = (
        "SELECT m.seq, m.created_us, -(m.embedding <#> v.q) AS cosine"  # noqa: S608
        " FROM (SELECT %s::vector AS q) v, memories m"
        f" WHERE m.user_id = %s AND m.agent_id = %s AND m.embedding IS NOT NULL AND {where}"
    )
    leg = [vector, user_id, agent_id, *params]
    if exact or not segments:
        return [(f"{head} ORDER BY m.embedding <#> v.q, m.seq LIMIT %s", [*leg, limit], limit)]
    ends = [int(end) for end in segments]
    asked = list(limits) or [limit] * len(ends)
    parts = [
        (f"{head}{f' AND m.seq > {lo}' if lo else ''} AND m.seq <= {hi}"
         f" ORDER BY {graph_expression(kind, dim)}, m.seq LIMIT %s", [*leg, n + HALFVEC_SLACK * (kind == "halfvec")], n)
        for lo, hi, n, kind in zip([0, *ends], ends, asked, list(kinds) or ["vector"] * len(ends), strict=False)
    ]
    rest = f"{head} AND m.seq > {ends[-1]} ORDER BY m.embedding <#> v.q, m.seq LIMIT %s"
    if conditions:
        # Under filters, every row's cosine first, then the filters tested best first until enough
        # pass (a subquery per row keeps the order): testing a LangGraph prefix's JSON on every row
        # first made a semantic search 64 against 40 ms (120,000 memories, the last 20,000 unindexed).
        rest = (
            "SELECT t.seq, t.created_us, t.cosine FROM (SELECT m.seq, m.created_us, -(m.embedding <#> v.q) AS cosine"  # noqa: S608
            " FROM (SELECT %s::vector AS q) v, memories m WHERE m.user_id = %s AND m.agent_id = %s"
            f" AND m.embedding IS NOT NULL AND m.seq > {ends[-1]} ORDER BY m.embedding <#> v.q, m.seq OFFSET 0) t"
            f" WHERE (SELECT {where} FROM memories m WHERE m.seq = t.seq) LIMIT %s"
        )
    parts.append((rest, [*leg, limit], limit))
    return parts
    # The unindexed rest under filters: every row's cosine, then the filters tested best first until
    # enough pass (a subquery per row keeps the order). Testing them on every row first cost 45 of a
    # 58 ms search at 100,000 memories (a LangGraph prefix's JSON tests on the last 20,000).
    parts.append((
        "SELECT t.seq, t.created_us, t.cosine FROM ("  # noqa: S608
        "SELECT m.seq, m.created_us, -(m.embedding <#> v.q) AS cosine FROM (SELECT %s::vector AS q) v, memories m"
        f" WHERE m.user_id = %s AND m.agent_id = %s AND m.embedding IS NOT NULL AND m.seq > {ends[-1]}"
        f" ORDER BY m.embedding <#> v.q, m.seq OFFSET 0) t WHERE (SELECT {where} FROM memories m WHERE m.seq = t.seq)"
        " LIMIT %s", [vector, user_id, agent_id, *params, limit], limit))
    return parts


#: How many of a namespace's memories (those of lowest ``sample`` key: a fixed random choice) a
#: filter is tried on, to estimate how many pass it.
FILTER_SAMPLE = 256

#: A filter that at least this share of that sample passes is searched as the namespace itself is
#: (an approximate index walk that tests the filter on the rows it meets, the keyword postings cut
#: as unfiltered): it rejects too few rows to make the walk miss neighbours.
LOOSE_SHARE = 0.5

# The namespace's size, and how many of its sample pass the filters and were tried.
_SHARE_SQL = """
SELECT (SELECT count FROM namespace_stats WHERE user_id = %s AND agent_id = %s),
       count(*) FILTER (WHERE {where}), count(*)
FROM (SELECT * FROM memories m WHERE m.user_id = %s AND m.agent_id = %s ORDER BY m.sample LIMIT %s) m
"""


async def filtered_exactly(conn: Any, user_id: str, agent_id: str, conditions: tuple[Condition, ...]) -> bool:
    """Whether the filters pass few enough of the namespace's memories (estimated from a sample of
    :data:`FILTER_SAMPLE`, as :func:`memkit._retrieval._fusion.dense_leg` estimates it) that both
    legs score every one that passes (:func:`memkit._retrieval._config.dense_path`); never a loose
    filter (:data:`LOOSE_SHARE`). Counting the rows that pass read every one of them, and a
    LangGraph prefix covering the namespace made that most of a search (17 of 51 ms at 10,000)."""
    where, params = filter_sql(conditions, POSTGRES)
    size, passed, tried = await (await conn.execute(_SHARE_SQL.format(where=where), [
        user_id, agent_id, *params, user_id, agent_id, FILTER_SAMPLE,
    ], prepare=False)).fetchone()
    if not tried:
        return True
    share = int(passed) / int(tried)
    return share < LOOSE_SHARE and dense_path(round(share * max(int(size or 0), int(tried)))) == "exact"


COSINES_SQL = (
    "SELECT m.seq, m.created_us, -(m.embedding <#> %s::vector) FROM memories m"
    " WHERE m.user_id = %s AND m.agent_id = %s AND m.seq = ANY(%s::bigint[]) AND m.embedding IS NOT NULL"
)

# For each pair of candidates next to each other in ``seq`` order (``lo`` < ``hi``), how many memories
# of the namespace lie between them, counted up to ``reach`` (one descent of the namespace's ``seq``
# index per pair): enough to place every candidate among the others.
GAPS_SQL = """
SELECT (SELECT count(*) FROM (
            SELECT FROM memories m WHERE m.user_id = %s AND m.agent_id = %s AND m.seq > g.lo AND m.seq < g.hi
            LIMIT %s) x)
FROM unnest(%s::bigint[], %s::bigint[]) WITH ORDINALITY AS g(lo, hi, i)
ORDER BY g.i
"""


def gaps_statement(user_id: str, agent_id: str, seqs: Sequence[int], reach: int) -> tuple[str, list[Any]]:
    """For the candidates ``seqs`` in ``seq`` order, how many of the namespace's memories lie between
    each and the next (at most ``reach``); :func:`neighbours` turns them into distances."""
    ordered = sorted(seqs)
    return GAPS_SQL, [user_id, agent_id, reach, int_array(ordered[:-1]), int_array(ordered[1:])]


def neighbours(seqs: Sequence[int], gaps: Sequence[int], reach: int) -> dict[int, list[tuple[int, int]]]:
    """Each candidate's fellow candidates at most ``reach`` memories of its namespace away (written
    before or after it), as ``(distance, seq)``, from :func:`gaps_statement`'s counts. Memories
    that are not candidates are left out: fusion gives them no score, so their pull is nil."""
    ordered = sorted(seqs)
    around: dict[int, list[tuple[int, int]]] = {}
    for i, seq in enumerate(ordered):
        distance = 0
        for j in range(i + 1, len(ordered)):
            distance += int(gaps[j - 1]) + 1
            if distance > reach:
                break
            around.setdefault(seq, []).append((distance, ordered[j]))
            around.setdefault(ordered[j], []).append((distance, seq))
    return around


def finite(value: float) -> float:
    return value if math.isfinite(value) else 0.0
