"""The PostgreSQL store's keyword leg: BM25 top-k from impact-ordered postings.

Scoring every memory that holds a common query term means reading (and decompressing) tens of
thousands of ``tsvector`` values per search in a big namespace. Instead, the database keeps one
row per (memory, term) in ``postings``, ordered in a b-tree by the term's *impact* in that
memory: its BM25 term weight ``tf (k1 + 1) / (tf + k1 (1 - b + b len / REFERENCE_LENGTH))``
for a fixed reference length. A search reads, per query term, the document frequency (an index
count) and only the highest-impact postings: ``TOP_POSTINGS`` per term, or ``PER_CANDIDATE`` per
memory wanted if that is more (:func:`postings_read`). Each memory found is then scored exactly
from its ``tsvector`` (the namespace's real average length, the same idf), which costs a read of
its row: the leg's main cost. (A budget shared among the terms halved that cost at a million
memories but kept only 85% of the exhaustive top 10 against 94%, and cut lists in namespaces of a
few thousand memories, so each term keeps its own.)

Before that, bounds from the impacts read set aside the memories that cannot make the list
(:func:`_bounds`): a memory whose best possible score is below the ``limit``-th best sure score
is not read at all. That changes nothing in the result (the best ``limit`` of the memories found,
exactly scored); it spares most of the reads when a rare term beside common ones decides the
list, and little when every list is long and flat (common terms in short notes all weigh the same,
and only a memory's row says which other query terms it holds).

The rows returned are always scored exactly; what the cut can change is which memories make
the list. It changes nothing when no list was cut (every term's document frequency within the postings
read). Otherwise it is the approximation search engines make: a memory holding several query
terms, each with a weight below the postings read for that term, can be missed. Measured at a
million memories (bench/postgres.py's Zipf corpus, its 60 queries, against the exhaustive
statement on the same store, load average 12): with 1,000 postings per search shared among the
terms, the top 10 held 84.7% of the exhaustive top 10 (44 of 60 queries exactly), at 30 / 44 ms
p50 / p95; 1,000 postings per term held 94.3% (52 of 60) at 66 / 155 ms. For the 100 a hybrid
search asks of the leg: 79.5% of the exhaustive top 100 at 41 / 70 ms, against 94.8% at 105 / 173 ms. When fewer than
``limit`` candidates pass the filters (a filter that rejects most of them), the exhaustive
statement of :mod:`memkit.adapters._postgres._sql` runs instead, so a filtered search never comes
back short.

Postings are kept by triggers on ``memories`` (statement-level for inserts and deletes, so one
multi-row insert pays one call), in the writer's transaction: a search never sees a memory
without its postings, in any process.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from memkit._core._filters import Condition
from memkit._retrieval._keyword import K1, B
from memkit.adapters._postgres import _sql as q
from memkit.adapters._sqlbase import filter_sql

__all__ = ["MIGRATION", "MIGRATION_4", "REFERENCE_LENGTH", "TOP_POSTINGS", "keyword_hits", "postings_read"]

#: The document length the stored impacts are computed for (close to short notes and chat lines).
REFERENCE_LENGTH = 32
#: How many postings a search reads per query term ...
TOP_POSTINGS = 1_000
#: ... or this many per memory it wants, if that is more.
PER_CANDIDATE = 10


def postings_read(terms: int, limit: int) -> int:
    """How many postings a search for ``limit`` memories reads per query term (of ``terms``, which
    every term reads alike)."""
    del terms
    return max(TOP_POSTINGS, PER_CANDIDATE * limit)

_IMPACT = (
    f"tf * {K1 + 1.0!r}::float8 / (tf + {K1!r}::float8 * (1 - {B!r}::float8 + {B!r}::float8 * len"
    f" / {float(REFERENCE_LENGTH)!r}::float8))"
)

# Statements of schema migration 3 (the numbers above are this module's constants, never input).
MIGRATION: tuple[str, ...] = (
    """CREATE TABLE postings (
        user_id  text NOT NULL,
        agent_id text NOT NULL,
        term     text NOT NULL,
        impact   float8 NOT NULL,   -- memkit_impact(tf, terms_len): the order a search reads
        seq      bigint NOT NULL    -- the memory
    )""",
    f"""CREATE FUNCTION memkit_impact(tf integer, len integer) RETURNS float8
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT {_IMPACT} $$""",
    """CREATE FUNCTION memkit_postings_add() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO postings (user_id, agent_id, term, impact, seq)
        SELECT n.user_id, n.agent_id, u.lexeme, memkit_impact(cardinality(u.positions), n.terms_len), n.seq
        FROM added n CROSS JOIN LATERAL unnest(n.terms) AS u(lexeme, positions, weights);
        RETURN NULL;
    END $$""",
    # A posting is found again by its whole key (the impact recomputed from the same inputs).
    """CREATE FUNCTION memkit_postings_drop() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM postings p USING (
            SELECT o.user_id, o.agent_id, u.lexeme AS term,
                   memkit_impact(cardinality(u.positions), o.terms_len) AS impact, o.seq
            FROM removed o CROSS JOIN LATERAL unnest(o.terms) AS u(lexeme, positions, weights)
        ) r
        WHERE p.user_id = r.user_id AND p.agent_id = r.agent_id AND p.term = r.term
          AND p.impact = r.impact AND p.seq = r.seq;
        RETURN NULL;
    END $$""",
    """CREATE FUNCTION memkit_postings_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM postings p USING (
            SELECT u.lexeme AS term, memkit_impact(cardinality(u.positions), OLD.terms_len) AS impact
            FROM unnest(OLD.terms) AS u(lexeme, positions, weights)
        ) r
        WHERE p.user_id = OLD.user_id AND p.agent_id = OLD.agent_id AND p.term = r.term
          AND p.impact = r.impact AND p.seq = OLD.seq;
        INSERT INTO postings (user_id, agent_id, term, impact, seq)
        SELECT NEW.user_id, NEW.agent_id, u.lexeme, memkit_impact(cardinality(u.positions), NEW.terms_len), NEW.seq
        FROM unnest(NEW.terms) AS u(lexeme, positions, weights);
        RETURN NULL;
    END $$""",
    """CREATE FUNCTION memkit_postings_clear() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        TRUNCATE postings;
        RETURN NULL;
    END $$""",
    # An existing store's memories, before the index (one sorted build beats row-by-row upkeep).
    """INSERT INTO postings (user_id, agent_id, term, impact, seq)
        SELECT m.user_id, m.agent_id, u.lexeme, memkit_impact(cardinality(u.positions), m.terms_len), m.seq
        FROM memories m CROSS JOIN LATERAL unnest(m.terms) AS u(lexeme, positions, weights)""",
    "CREATE INDEX postings_top ON postings (user_id, agent_id, term, impact DESC, seq DESC)",
    "CREATE TRIGGER memories_postings_add AFTER INSERT ON memories REFERENCING NEW TABLE AS added"
    " FOR EACH STATEMENT EXECUTE FUNCTION memkit_postings_add()",
    "CREATE TRIGGER memories_postings_drop AFTER DELETE ON memories REFERENCING OLD TABLE AS removed"
    " FOR EACH STATEMENT EXECUTE FUNCTION memkit_postings_drop()",
    # Memories' terms never change today; if a later version rewrites them, postings follow.
    "CREATE TRIGGER memories_postings_change AFTER UPDATE OF user_id, agent_id, seq, terms, terms_len ON memories"
    " FOR EACH ROW WHEN (OLD.terms IS DISTINCT FROM NEW.terms OR OLD.terms_len IS DISTINCT FROM NEW.terms_len"
    " OR OLD.user_id IS DISTINCT FROM NEW.user_id OR OLD.agent_id IS DISTINCT FROM NEW.agent_id"
    " OR OLD.seq IS DISTINCT FROM NEW.seq) EXECUTE FUNCTION memkit_postings_change()",
    "CREATE TRIGGER memories_postings_clear AFTER TRUNCATE ON memories"
    " FOR EACH STATEMENT EXECUTE FUNCTION memkit_postings_clear()",
)

# Statements of schema migration 4: the same postings keyed by integers. Text keys made every
# posting carry the namespace's two names and its term, compared under the database's collation
# at each b-tree step; a namespace number and a 64-bit hash of the term make an entry a quarter
# of the size and compare as machine words, which is most of what a writer paid for postings.
# The hash is PostgreSQL's own ``hashtextextended`` (stable: hash partitioning stores its values).
# Two terms of one namespace sharing a hash would only share a list: candidates are scored from
# the memory's ``tsvector`` by the term's text, so a collision can never change a score.
MIGRATION_4: tuple[str, ...] = (
    "DROP TRIGGER memories_postings_add ON memories",
    "DROP TRIGGER memories_postings_drop ON memories",
    "DROP TRIGGER memories_postings_change ON memories",
    "DROP TRIGGER memories_postings_clear ON memories",
    "DROP FUNCTION memkit_postings_add, memkit_postings_drop, memkit_postings_change, memkit_postings_clear",
    "DROP TABLE postings",
    # A number per namespace that ever held a memory (a search looks its own up; never reused).
    """CREATE TABLE namespaces (
        id       integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        user_id  text NOT NULL,
        agent_id text NOT NULL,
        UNIQUE (user_id, agent_id)
    )""",
    "INSERT INTO namespaces (user_id, agent_id) SELECT DISTINCT user_id, agent_id FROM memories ORDER BY 1, 2",
    """CREATE TABLE postings (
        ns     integer NOT NULL,  -- namespaces.id
        impact float8 NOT NULL,   -- memkit_impact(tf, terms_len): the order a search reads
        term   bigint NOT NULL,   -- hashtextextended(term, 0)
        seq    bigint NOT NULL    -- the memory
    )""",
    # New namespaces first (in one order in every writer, so two writers never wait in a cycle);
    # a separate statement, so the join sees a namespace another writer has just committed.
    """CREATE FUNCTION memkit_postings_add() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO namespaces (user_id, agent_id)
        SELECT DISTINCT n.user_id, n.agent_id FROM added n
        WHERE NOT EXISTS (SELECT 1 FROM namespaces s WHERE s.user_id = n.user_id AND s.agent_id = n.agent_id)
        ORDER BY 1, 2
        ON CONFLICT DO NOTHING;
        INSERT INTO postings (ns, impact, term, seq)
        SELECT s.id, memkit_impact(cardinality(u.positions), n.terms_len), hashtextextended(u.lexeme, 0), n.seq
        FROM added n JOIN namespaces s ON s.user_id = n.user_id AND s.agent_id = n.agent_id
        CROSS JOIN LATERAL unnest(n.terms) AS u(lexeme, positions, weights);
        RETURN NULL;
    END $$""",
    # A posting is found again by its whole key (the impact recomputed from the same inputs).
    """CREATE FUNCTION memkit_postings_drop() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM postings p USING (
            SELECT s.id AS ns, hashtextextended(u.lexeme, 0) AS term,
                   memkit_impact(cardinality(u.positions), o.terms_len) AS impact, o.seq
            FROM removed o JOIN namespaces s ON s.user_id = o.user_id AND s.agent_id = o.agent_id
            CROSS JOIN LATERAL unnest(o.terms) AS u(lexeme, positions, weights)
        ) r
        WHERE p.ns = r.ns AND p.term = r.term AND p.impact = r.impact AND p.seq = r.seq;
        RETURN NULL;
    END $$""",
    """CREATE FUNCTION memkit_postings_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM postings p USING (
            SELECT s.id AS ns, hashtextextended(u.lexeme, 0) AS term,
                   memkit_impact(cardinality(u.positions), OLD.terms_len) AS impact
            FROM namespaces s CROSS JOIN unnest(OLD.terms) AS u(lexeme, positions, weights)
            WHERE s.user_id = OLD.user_id AND s.agent_id = OLD.agent_id
        ) r
        WHERE p.ns = r.ns AND p.term = r.term AND p.impact = r.impact AND p.seq = OLD.seq;
        INSERT INTO namespaces (user_id, agent_id) VALUES (NEW.user_id, NEW.agent_id) ON CONFLICT DO NOTHING;
        INSERT INTO postings (ns, impact, term, seq)
        SELECT s.id, memkit_impact(cardinality(u.positions), NEW.terms_len), hashtextextended(u.lexeme, 0), NEW.seq
        FROM namespaces s CROSS JOIN unnest(NEW.terms) AS u(lexeme, positions, weights)
        WHERE s.user_id = NEW.user_id AND s.agent_id = NEW.agent_id;
        RETURN NULL;
    END $$""",
    """CREATE FUNCTION memkit_postings_clear() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        TRUNCATE postings, namespaces;
        RETURN NULL;
    END $$""",
    """INSERT INTO postings (ns, impact, term, seq)
        SELECT s.id, memkit_impact(cardinality(u.positions), m.terms_len), hashtextextended(u.lexeme, 0), m.seq
        FROM memories m JOIN namespaces s ON s.user_id = m.user_id AND s.agent_id = m.agent_id
        CROSS JOIN LATERAL unnest(m.terms) AS u(lexeme, positions, weights)""",
    "CREATE INDEX postings_top ON postings (ns, term, impact DESC, seq DESC)",
    # The postings find every memory holding a term, as this GIN index did, which writers kept up too.
    "DROP INDEX IF EXISTS memories_terms",
    "CREATE TRIGGER memories_postings_add AFTER INSERT ON memories REFERENCING NEW TABLE AS added"
    " FOR EACH STATEMENT EXECUTE FUNCTION memkit_postings_add()",
    "CREATE TRIGGER memories_postings_drop AFTER DELETE ON memories REFERENCING OLD TABLE AS removed"
    " FOR EACH STATEMENT EXECUTE FUNCTION memkit_postings_drop()",
    "CREATE TRIGGER memories_postings_change AFTER UPDATE OF user_id, agent_id, seq, terms, terms_len ON memories"
    " FOR EACH ROW WHEN (OLD.terms IS DISTINCT FROM NEW.terms OR OLD.terms_len IS DISTINCT FROM NEW.terms_len"
    " OR OLD.user_id IS DISTINCT FROM NEW.user_id OR OLD.agent_id IS DISTINCT FROM NEW.agent_id"
    " OR OLD.seq IS DISTINCT FROM NEW.seq) EXECUTE FUNCTION memkit_postings_change()",
    "CREATE TRIGGER memories_postings_clear AFTER TRUNCATE ON memories"
    " FOR EACH STATEMENT EXECUTE FUNCTION memkit_postings_clear()",
)

# Per query term: its highest-impact postings and its document frequency in the namespace
# (counted from the index alone, unless the postings read were all it has); with the namespace's
# N and average length.
# A term in at least half the namespace has the floored idf whatever its exact count, so
# counting stops there (the commonest terms of a big namespace are the longest to count).
_TOP_SQL = """
SELECT s.count, CASE WHEN s.terms > 0 THEN s.terms::float8 / s.count ELSE 1 END, t.term,
       CASE WHEN top.n < %(reach)s THEN top.n
            ELSE (SELECT count(*) FROM (SELECT FROM postings p WHERE p.ns = ns.id AND p.term = t.hash
                                        LIMIT ceil(s.count / 2.0)::bigint) c) END,
       top.seqs, top.n, top.impacts
FROM namespace_stats s
JOIN namespaces ns ON ns.user_id = s.user_id AND ns.agent_id = s.agent_id
CROSS JOIN LATERAL (SELECT x.term, hashtextextended(x.term, 0) AS hash FROM unnest(%(terms)s::text[]) AS x(term)) t
CROSS JOIN LATERAL (
    SELECT array_agg(x.seq) AS seqs, count(*) AS n, array_agg(x.impact) AS impacts FROM (
        SELECT p.seq, p.impact FROM postings p WHERE p.ns = ns.id AND p.term = t.hash
        ORDER BY p.impact DESC, p.seq DESC LIMIT %(reach)s) x
) top
WHERE s.user_id = %(u)s AND s.agent_id = %(a)s AND s.count > 0
"""


class _Found(NamedTuple):
    """One query term's top postings, as :func:`_top` reads them."""

    n: float  # the namespace's memories
    avglen: float  # and their average length
    term: str
    df: int  # its document frequency (exact, or at least ceil(n / 2))
    seqs: list[int]  # its highest-impact memories, best first
    impacts: list[float]  # and their impacts
    got: int  # how many were read


async def _top(conn: Any, user_id: str, agent_id: str, terms: list[str], reach: int) -> list[_Found]:
    """Per term: N, the average length, the term, its document frequency, its top postings and
    how many were read."""
    # Binary results: each term's top seqs and impacts arrive as arrays, which psycopg reads four
    # times faster in binary than as text (1,000 per term).
    rows = await (await conn.execute(_TOP_SQL, {"reach": reach, "terms": terms, "u": user_id, "a": agent_id},
                                     prepare=False, binary=True)).fetchall()
    return [_Found(float(n), float(avglen), t, int(df), seqs or [], impacts or [], int(got))
            for n, avglen, t, df, seqs, got, impacts in rows]


# The exact BM25 of the candidate memories that pass the filters, with the idf given per term.
_SCORE_SQL = """
WITH w AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS w(lexeme, idf)),
hits AS MATERIALIZED (
    SELECT m.seq, m.created_us, m.terms_len, ts_filter(setweight(m.terms, 'A', %s::text[]), '{{a}}') AS found
    FROM memories m
    WHERE m.user_id = %s AND m.agent_id = %s AND {rows} AND ({where})
)
SELECT h.seq, h.created_us,
       sum(w.idf * cardinality(u.positions) * %s::float8
           / (cardinality(u.positions) + %s::float8 * (1 - %s::float8 + %s::float8 * h.terms_len / %s::float8)))
           AS score
FROM hits h CROSS JOIN LATERAL unnest(h.found) AS u(lexeme, positions, weights) JOIN w ON w.lexeme = u.lexeme
GROUP BY h.seq, h.created_us
ORDER BY score DESC, h.created_us DESC, h.seq DESC
LIMIT %s
"""


def _idf(n: float, df: int) -> float:
    # FTS5's idf, floored as memkit._retrieval._keyword.KeywordIndex.top floors it (and as the
    # exhaustive statement does): floored for any df >= n / 2, so a df counted up to that is exact.
    x = math.log((n - df + 0.5) / (df + 0.5))
    return x if x > 0 else 1e-6


def _bounds(found: list[_Found], idf: dict[str, float], reach: int) -> tuple[Any, Any, Any]:
    """``(candidates, low, high)``: every memory found in a top list, with bounds on its exact BM25.

    A stored impact is the term's BM25 weight for a document length over ``REFERENCE_LENGTH``; for
    the namespace's average length ``A`` the weight of the same (tf, length) lies between the
    impact times ``min(1, A / REFERENCE_LENGTH)`` and times ``max(1, A / REFERENCE_LENGTH)`` (the
    length term of the denominator scales by at most that ratio), and below ``K1 + 1``. A memory
    missing from a term's list that was cut has an impact at most the last one read there; from a
    list read whole it does not hold the term.
    """
    ratio = found[0].avglen / REFERENCE_LENGTH
    low, high, cap = min(1.0, ratio), max(1.0, ratio), K1 + 1.0
    lists = [(f, idf[f.term], np.asarray(f.impacts, dtype=np.float64)) for f in found if f.seqs]
    missing = {f.term: w * min(v[-1] * high, cap) if f.got >= reach else 0.0 for f, w, v in lists}
    seqs = np.concatenate([np.asarray(f.seqs, dtype=np.int64) for f, _, _ in lists])
    candidates, at = np.unique(seqs, return_inverse=True)
    lower = np.bincount(at, np.concatenate([w * v * low for _, w, v in lists]), len(candidates))
    upper = sum(missing.values()) + np.bincount(
        at, np.concatenate([w * np.minimum(v * high, cap) - missing[f.term] for f, w, v in lists]), len(candidates))
    # Room for floating-point rounding, here and in the database's own sums.
    return candidates, lower * (1 - 1e-9), upper * (1 + 1e-9)


async def _scores(conn: Any, user_id: str, agent_id: str, found: list[_Found], idf: dict[str, float],
                  candidates: list[int] | None, conditions: tuple[Condition, ...],
                  limit: int) -> list[tuple[int, int, float]]:
    """The best ``limit`` of ``candidates`` (``None``: every memory that passes the filters and holds
    a term) by their exact BM25."""
    where, params = filter_sql(conditions, q.POSTGRES)
    used = [f.term for f in found if f.seqs or candidates is None]
    rows = ("m.seq = ANY(%s::bigint[])", q.int_array(candidates)) if candidates is not None else (
        "m.terms @@ %s::tsquery", q.any_query(used))
    return [(int(s), int(c), float(v)) for s, c, v in await (await conn.execute(
        _SCORE_SQL.format(where=where, rows=rows[0]),
        [used, [idf[t] for t in used], used, user_id, agent_id, rows[1], *params,
         K1 + 1.0, K1, B, B, found[0].avglen, limit],
        prepare=False,
    )).fetchall()]


async def keyword_hits(
    conn: Any, user_id: str, agent_id: str, terms: list[str], conditions: tuple[Condition, ...], limit: int,
    exact: bool = False,
) -> list[tuple[int, int, float]]:
    """``(seq, created_us, bm25)`` of the namespace's best ``limit`` memories for ``terms``, best
    first, ties newest first, each scored exactly; the candidates are the memories among each term's
    top postings (see the module's note on what that cut can miss).

    Only the candidates that can still make the list are scored from their ``tsvector``: bounds
    from the postings' impacts (:func:`_bounds`) set aside every memory whose best possible score
    is below the ``limit``-th best sure one, which changes nothing in the result. With filters,
    the best sure ones may not pass: when the ones that do score below that bound, every candidate
    is scored.

    ``exact``: the filters pass few memories (:func:`memkit.adapters._postgres._sql.filtered_exactly`):
    those holding a term are scored, all of them and no other, and no postings are read but the
    terms' counts.
    """
    reach = 1 if exact else postings_read(len(terms), limit)
    found = await _top(conn, user_id, agent_id, terms, reach)
    if not found:
        return []
    n = found[0].n
    idf = {f.term: _idf(n, f.df) for f in found}
    if exact:
        return await _scores(conn, user_id, agent_id, found, idf, None, conditions, limit)
    cut = any(f.got >= reach for f in found)  # else every memory holding a term was read
    scored: list[tuple[int, int, float]] = []
    if any(f.seqs for f in found):
        candidates, lower, upper = _bounds(found, idf, reach)
        if len(candidates) > limit:
            floor = float(np.partition(lower, len(lower) - limit)[len(lower) - limit])
            kept = candidates[upper >= floor]
            scored = await _scores(conn, user_id, agent_id, found, idf, kept.tolist(), conditions, limit)
            # A memory set aside scores below the floor: when the list's last reaches it (without
            # filters it does, each sure one scoring at least its lower bound), none belonged. Only
            # two terms sharing a hash (one list holding both) could break the bound.
            if len(scored) < limit or scored[limit - 1][2] < floor:
                scored = await _scores(conn, user_id, agent_id, found, idf, candidates.tolist(), conditions, limit)
        else:
            scored = await _scores(conn, user_id, agent_id, found, idf, candidates.tolist(), conditions, limit)
    if not cut or len(scored) >= limit:
        return scored
    sql, params = q.keyword_statement(user_id, agent_id, terms, conditions, limit)
    return [(int(s), int(c), float(v)) for s, c, v in await (await conn.execute(sql, params, prepare=False)).fetchall()]
