"""The store file's migrations: each entry of :data:`MIGRATIONS` upgrades the schema from the previous
version (:func:`memkit.adapters._sqlite._schema.migrate` runs them in one write transaction)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator

from memkit.adapters._sqlite._trace_writes import step_fields, write_steps

__all__ = ["MIGRATIONS", "statements"]

# Each entry upgrades the schema from the previous version; never edit a shipped one.
MIGRATIONS: dict[int, str | Callable[[sqlite3.Connection], None]] = {
    1: """
    CREATE TABLE store_meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE memories (
        seq        INTEGER PRIMARY KEY,      -- insertion order; the keyword index's key
        id         TEXT NOT NULL UNIQUE,
        user_id    TEXT NOT NULL,
        agent_id   TEXT NOT NULL,
        content    TEXT NOT NULL,
        metadata   TEXT NOT NULL DEFAULT '{}',  -- JSON, validated before it gets here
        created_us INTEGER NOT NULL          -- microseconds since the epoch, UTC
    );
    CREATE INDEX memories_namespace ON memories (user_id, agent_id, created_us DESC, seq DESC);
    """,
    2: """
    CREATE TABLE memory_vectors (
        seq    INTEGER PRIMARY KEY,          -- memories.seq
        vector BLOB NOT NULL                 -- float32 little-endian, store_meta embedder_dim values
    );
    CREATE TRIGGER memories_vectors_delete AFTER DELETE ON memories BEGIN
        DELETE FROM memory_vectors WHERE seq = old.seq;
    END;
    """,
    # Traces as typed columns, kept by triggers, so a million steps read as columns
    # without parsing each record's metadata JSON (see memkit.adapters._sqlite._traces). Repetitive text
    # (namespaces, workflow, step, tool, status) is stored as codes into trace_dict:
    # integers travel out of SQLite several times faster than strings.
    3: """
    CREATE TABLE trace_dict (
        code INTEGER PRIMARY KEY,
        text TEXT NOT NULL UNIQUE
    );
    CREATE TABLE trace_steps (
        seq         INTEGER PRIMARY KEY,     -- memories.seq
        id          TEXT NOT NULL,           -- memories.id
        created_us  INTEGER NOT NULL,        -- memories.created_us
        user_id     INTEGER NOT NULL,        -- codes into trace_dict from here on
        agent_id    INTEGER NOT NULL,
        workflow_id INTEGER,
        run_id      INTEGER,
        step_name   INTEGER,
        tool        INTEGER,
        status      INTEGER,
        step_index  INTEGER,
        started_us  INTEGER,                 -- trace timestamp, microseconds since the epoch
        duration_us INTEGER,
        retry_count INTEGER,
        error       TEXT,
        parameters  TEXT,                    -- JSON
        result      TEXT                     -- JSON
    );
    CREATE INDEX trace_steps_workflow ON trace_steps (workflow_id);
    CREATE TABLE trace_keys (
        kind TEXT NOT NULL,                  -- 'params' or 'result'
        key  TEXT NOT NULL,
        PRIMARY KEY (kind, key)
    ) WITHOUT ROWID;
    CREATE VIEW trace_source AS SELECT
        seq, id, created_us, user_id, agent_id,
        json_extract(metadata, '$.workflow_id') AS workflow_id,
        json_extract(metadata, '$.run_id') AS run_id,
        json_extract(metadata, '$.trace.step_name') AS step_name,
        json_extract(metadata, '$.trace.tool') AS tool,
        json_extract(metadata, '$.trace.status') AS status,
        json_extract(metadata, '$.trace.step_index') AS step_index,
        CAST(round(json_extract(metadata, '$.trace.timestamp') * 1e6) AS INTEGER) AS started_us,
        CAST(round(json_extract(metadata, '$.trace.duration') * 1e6) AS INTEGER) AS duration_us,
        json_extract(metadata, '$.trace.retry_count') AS retry_count,
        json_extract(metadata, '$.trace.error') AS error,
        CASE json_type(metadata, '$.trace.parameters') WHEN 'object' THEN metadata -> '$.trace.parameters' END
            AS parameters,
        CASE json_type(metadata, '$.trace.result') WHEN 'object' THEN metadata -> '$.trace.result' END AS result
    FROM memories WHERE json_extract(metadata, '$.type') = 'trace';
    CREATE TRIGGER trace_steps_insert AFTER INSERT ON memories
    WHEN json_extract(new.metadata, '$.type') = 'trace' BEGIN
        INSERT OR IGNORE INTO trace_dict (text)
            SELECT value FROM trace_source s, json_each(json_array(
                s.user_id, s.agent_id, s.workflow_id, s.run_id, s.step_name, s.tool, s.status))
            WHERE s.seq = new.seq AND json_each.type = 'text';
        INSERT INTO trace_steps
            SELECT seq, id, created_us,
                (SELECT code FROM trace_dict WHERE text = s.user_id),
                (SELECT code FROM trace_dict WHERE text = s.agent_id),
                (SELECT code FROM trace_dict WHERE text = s.workflow_id),
                (SELECT code FROM trace_dict WHERE text = s.run_id),
                (SELECT code FROM trace_dict WHERE text = s.step_name),
                (SELECT code FROM trace_dict WHERE text = s.tool),
                (SELECT code FROM trace_dict WHERE text = s.status),
                step_index, started_us, duration_us, retry_count, error, parameters, result
            FROM trace_source s WHERE s.seq = new.seq;
        INSERT OR IGNORE INTO trace_keys SELECT 'params', j.key FROM trace_steps t, json_each(t.parameters) j
            WHERE t.seq = new.seq;
        INSERT OR IGNORE INTO trace_keys SELECT 'result', j.key FROM trace_steps t, json_each(t.result) j
            WHERE t.seq = new.seq;
    END;
    CREATE TRIGGER trace_steps_delete AFTER DELETE ON memories BEGIN
        DELETE FROM trace_steps WHERE seq = old.seq;
    END;
    INSERT OR IGNORE INTO trace_dict (text)
        SELECT value FROM trace_source s, json_each(json_array(
            s.user_id, s.agent_id, s.workflow_id, s.run_id, s.step_name, s.tool, s.status))
        WHERE json_each.type = 'text';
    INSERT INTO trace_steps
        SELECT seq, id, created_us,
            (SELECT code FROM trace_dict WHERE text = s.user_id),
            (SELECT code FROM trace_dict WHERE text = s.agent_id),
            (SELECT code FROM trace_dict WHERE text = s.workflow_id),
            (SELECT code FROM trace_dict WHERE text = s.run_id),
            (SELECT code FROM trace_dict WHERE text = s.step_name),
            (SELECT code FROM trace_dict WHERE text = s.tool),
            (SELECT code FROM trace_dict WHERE text = s.status),
            step_index, started_us, duration_us, retry_count, error, parameters, result
        FROM trace_source s;
    INSERT OR IGNORE INTO trace_keys SELECT 'params', j.key FROM trace_steps t, json_each(t.parameters) j;
    INSERT OR IGNORE INTO trace_keys SELECT 'result', j.key FROM trace_steps t, json_each(t.result) j;
    """,
    # Each step's numbers and text codes packed in one blob and its id, error, parameters and result
    # joined in one cell, for fewer values to leave SQLite; params/result keys come from the JSON:
    # trace_keys goes. Migration 13 replaces this layout and builds every row (this one once copied
    # the rows through an SQL function and re-created the insert trigger).
    4: """
    DROP TRIGGER trace_steps_insert;
    DROP TRIGGER trace_steps_delete;
    DROP TABLE trace_keys;
    DROP TABLE trace_steps;
    CREATE TABLE trace_steps (
        seq         INTEGER PRIMARY KEY,     -- memories.seq
        created_us  INTEGER NOT NULL,        -- memories.created_us
        user_id     INTEGER NOT NULL,        -- codes into trace_dict, for filters
        agent_id    INTEGER NOT NULL,
        workflow_id INTEGER,
        status      INTEGER,
        numbers     BLOB NOT NULL,           -- TRACE_NUMBERS as little-endian int64
        cells       TEXT NOT NULL            -- id, then error, parameters, result as JSON; char(31) between
    );
    CREATE INDEX trace_steps_workflow ON trace_steps (workflow_id);
    CREATE TRIGGER trace_steps_delete AFTER DELETE ON memories BEGIN
        DELETE FROM trace_steps WHERE seq = old.seq;
    END;
    """,
}

_MEMORIES_V5 = """
CREATE TABLE memories_v5 (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,  -- never handed out twice, even after a delete
    id         TEXT NOT NULL UNIQUE,
    user_id    TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    content    TEXT NOT NULL,
    metadata   TEXT NOT NULL DEFAULT '{}',
    created_us INTEGER NOT NULL
)
"""

_DELETIONS_V5 = """
CREATE TABLE memory_deletions (
    change   INTEGER PRIMARY KEY AUTOINCREMENT,  -- the feed's position
    seq      INTEGER NOT NULL,                   -- memories.seq of the deleted memory
    user_id  TEXT NOT NULL,
    agent_id TEXT NOT NULL
);
CREATE TRIGGER memories_deletions AFTER DELETE ON memories BEGIN
    INSERT INTO memory_deletions (seq, user_id, agent_id) VALUES (old.seq, old.user_id, old.agent_id);
END;
CREATE TABLE keyword_snapshots (
    user_id  TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    seq      INTEGER NOT NULL,  -- the feed position the saved index holds
    change   INTEGER NOT NULL,
    data     BLOB NOT NULL,     -- KeywordIndex.to_bytes()
    PRIMARY KEY (user_id, agent_id)
);
"""


def _never_reuse_seqs(conn: sqlite3.Connection) -> None:
    """Make ``memories.seq`` AUTOINCREMENT and log deletions: the change feed caches consume
    (and keyword indexes saved at a feed position, so a new process need not rebuild them).

    A plain INTEGER PRIMARY KEY hands the next row the number of a just-deleted newest
    row, so a cache keyed by seq could not tell the new memory from the deleted one.
    SQLite cannot add AUTOINCREMENT to a table, so the table is rebuilt; its indexes,
    triggers and the view over it are re-created from their own stored definitions.
    """
    kept = [
        sql for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND type IN ('index', 'trigger')"
            " AND tbl_name = 'memories' ORDER BY type, name"
        )
    ]
    views = [
        (name, sql) for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'view'")
    ]
    for name, _ in views:
        conn.execute(f'DROP VIEW "{name}"')
    conn.execute(_MEMORIES_V5)
    conn.execute(
        "INSERT INTO memories_v5 (seq, id, user_id, agent_id, content, metadata, created_us)"
        " SELECT seq, id, user_id, agent_id, content, metadata, created_us FROM memories ORDER BY seq"
    )
    conn.execute("DROP TABLE memories")
    conn.execute("ALTER TABLE memories_v5 RENAME TO memories")
    for sql in kept:
        conn.execute(sql)
    for _, sql in views:
        conn.execute(sql)
    for statement in statements(_DELETIONS_V5):
        conn.execute(statement)


MIGRATIONS[5] = _never_reuse_seqs

# Recalls: what each search returned at which step. The whole recall is one JSON body
# (hits with their text snapshots: a recall outlives the memories it names, so nothing
# here refers to memories.seq); the columns are what reads filter on.
MIGRATIONS[6] = """
CREATE TABLE recalls (
    seq         INTEGER PRIMARY KEY,     -- recording order
    id          TEXT NOT NULL UNIQUE,
    created_us  INTEGER NOT NULL,
    user_id     TEXT NOT NULL,           -- the namespace searched
    agent_id    TEXT NOT NULL,
    workflow_id TEXT,
    run_id      TEXT,
    step_index  INTEGER,
    body        TEXT NOT NULL            -- memkit._recall._recording.encode: JSON, hits as arrays
);
CREATE INDEX recalls_namespace ON recalls (user_id, agent_id, seq);
CREATE INDEX recalls_workflow ON recalls (workflow_id, run_id, step_index);
"""

# What the dense leg derives from a namespace's vectors (running moments, principal axes and
# every vector's projection on them) costs seconds per 100k memories to compute and tens of
# milliseconds to read back, so it is saved at a change-feed position like a keyword index.
# Columns are in reading order: a new process reads head and coarse, and the vectors (last,
# so SQLite need not walk past them) only when it needs them all.
MIGRATIONS[7] = """
CREATE TABLE vector_snapshots (
    user_id    TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    seq        INTEGER NOT NULL,  -- the feed position the saved index holds
    change     INTEGER NOT NULL,
    embedder   TEXT NOT NULL,     -- the embedder that made the vectors (another one's is ignored)
    size       INTEGER NOT NULL,  -- vectors saved
    dim        INTEGER NOT NULL,
    coarse_dim INTEGER NOT NULL,  -- dimensions of the shortlist projection; 0 for none
    head       BLOB NOT NULL,     -- keys int64, sum and moment float64, basis float32; little-endian
    coarse     BLOB NOT NULL,     -- size x coarse_dim float32
    matrix     BLOB NOT NULL,     -- size x dim float32, in key order
    PRIMARY KEY (user_id, agent_id)
);
"""

def _recall_step_namespaces(conn: sqlite3.Connection) -> None:
    """Say in which namespace the step of each recall recorded before this version was stored.

    A recall now keeps the namespace of its step's trace (``trace_user_id``/``trace_agent_id`` in
    its body): two users' runs of one workflow share workflow, run and step index, and only the
    namespace tells their recalls apart. One recorded earlier names none and is read as belonging
    to the step of the namespace it searched; but histories write their traces as ``system`` by
    default while their searches read a user's namespace. So where that step is not there and
    exactly one namespace holds a step with the recall's workflow, run and index, the recall is
    that step's. Where several do, it is left to none of them rather than guessed.
    """
    legacy = conn.execute(
        "SELECT seq, user_id, agent_id, workflow_id, run_id, step_index FROM recalls"
        " WHERE step_index IS NOT NULL AND json_extract(body, '$.trace_user_id') IS NULL"
    ).fetchall()
    if not legacy:
        return
    steps: dict[tuple[object, object, object], set[tuple[str, str]]] = {}
    for user, agent, workflow, run, index in conn.execute(
        "SELECT DISTINCT user_id, agent_id, json_extract(metadata, '$.workflow_id'),"
        " json_extract(metadata, '$.run_id'), json_extract(metadata, '$.step_index') FROM memories"
        " WHERE json_extract(metadata, '$.type') = 'trace'"
    ):
        steps.setdefault((workflow, run, index), set()).add((user, agent))
    for seq, user, agent, workflow, run, index in legacy:
        owners = steps.get((workflow, run, index), set())
        if (user, agent) in owners or len(owners) != 1:
            continue
        ((owner_user, owner_agent),) = owners
        conn.execute(
            "UPDATE recalls SET body = json_set(body, '$.trace_user_id', ?, '$.trace_agent_id', ?) WHERE seq = ?",
            (owner_user, owner_agent, seq),
        )


MIGRATIONS[8] = _recall_step_namespaces

# Marks: a researcher's verdicts on recalled memories and steps. The id is derived from the
# namespace and the target (memkit._recall._marks.mark_id), so marking a target again replaces the
# row and never reaches another namespace's. Like a recall, a mark names memories and steps
# by id only: it outlives them.
MIGRATIONS[9] = """
CREATE TABLE marks (
    id          TEXT PRIMARY KEY,
    created_us  INTEGER NOT NULL,
    user_id     TEXT NOT NULL,           -- the namespace of what is marked
    agent_id    TEXT NOT NULL,
    workflow_id TEXT,
    run_id      TEXT,
    body        TEXT NOT NULL            -- memkit._recall._marks.dumps: the mark as JSON
);
CREATE INDEX marks_namespace ON marks (user_id, agent_id);
CREATE INDEX marks_workflow ON marks (workflow_id, run_id);
"""

def _recall_step_columns(conn: sqlite3.Connection) -> None:
    """The namespace of the step each recall belongs to (:func:`memkit._core._recalls.step_namespace`)
    as columns, indexed with the step's workflow, run and index: counting every step's recalls
    then reads that index alone, never the bodies (most of the table's bytes). The columns are
    added only where missing (a store marked older than it is keeps them) and filled from the bodies."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(recalls)")}
    for column in ("step_user_id", "step_agent_id"):
        if column not in present:
            conn.execute(f"ALTER TABLE recalls ADD COLUMN {column} TEXT")
    conn.execute(
        "UPDATE recalls SET"
        " step_user_id = coalesce(nullif(json_extract(body, '$.trace_user_id'), ''), user_id),"
        " step_agent_id = coalesce(nullif(json_extract(body, '$.trace_agent_id'), ''), agent_id)"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS recalls_steps ON recalls (step_user_id, step_agent_id, workflow_id, run_id,"
        " step_index)"
    )


MIGRATIONS[10] = _recall_step_columns

# 11 re-created the insert trigger to read a step's timing as the generic reads do and re-packed the
# steps it read otherwise, and 12 dropped the trigger for rows written from Python: migration 13 now
# builds every row again, so neither has anything left to do but drop a trigger a file still has
# (IF EXISTS: a store marked older than it is runs them again).
MIGRATIONS[11] = MIGRATIONS[12] = "DROP TRIGGER IF EXISTS trace_steps_insert;"


# Trace steps as plain columns, texts as texts, built in Python by the one builder memkit writes with
# (memkit.adapters._sqlite._trace_writes). Schema 4's packed numbers, dictionary codes and joined cells
# made a frame of 100k-1M steps and the run list only 1.0-1.4x faster to read (docs/benchmarks.md), short
# of what a second layout and its packing code must buy; and the SQL that filled them from the JSON ended
# a text at a NUL. The delete trigger (migration 4's) stays. IF EXISTS: a store marked older than it is
# runs this again.
_PLAIN_STEPS = """
DROP VIEW IF EXISTS trace_source;
DROP TABLE IF EXISTS trace_steps;
DROP TABLE IF EXISTS trace_dict;
CREATE TABLE trace_steps (
    seq         INTEGER PRIMARY KEY,     -- memories.seq
    id          TEXT NOT NULL,           -- memories.id, created_us, user_id and agent_id
    created_us  INTEGER NOT NULL,
    user_id     TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    workflow_id TEXT,
    run_id      TEXT,
    step_name   TEXT,
    tool        TEXT,
    status      TEXT,
    step_index  INTEGER,
    started_us  INTEGER,                 -- microseconds since the epoch
    duration_us INTEGER,
    retry_count INTEGER,
    error       TEXT,
    parameters  TEXT,                    -- JSON objects
    result      TEXT
);
CREATE INDEX trace_steps_workflow ON trace_steps (workflow_id);
"""


def _steps_built_in_python(conn: sqlite3.Connection) -> None:
    """Every trace step's row in the plain table, built from its memory as memkit builds a new one."""
    for statement in statements(_PLAIN_STEPS):
        conn.execute(statement)
    rows = conn.execute(
        "SELECT seq, id, created_us, user_id, agent_id, metadata FROM memories"
        " WHERE json_extract(metadata, '$.type') = 'trace' ORDER BY seq"
    )
    while chunk := rows.fetchmany(10_000):
        steps = []
        for *columns, metadata in chunk:
            fields = step_fields(json.loads(metadata))
            if fields is not None:
                steps.append((*columns, *fields))
        write_steps(conn, steps)


MIGRATIONS[13] = _steps_built_in_python

# The LangGraph store's namespaces, newest first within each (memkit.langgraph): listing one, or
# every distinct one, is then a few index seeks, not a test of each memory of the memkit namespace.
# Partial, so memories that are not LangGraph items (traces) neither pay for it nor take room in it.
MIGRATIONS[14] = """
CREATE INDEX IF NOT EXISTS memories_listed ON memories
    (user_id, agent_id, json_extract(metadata, '$.lg_path'), created_us DESC, seq DESC)
    WHERE json_extract(metadata, '$.lg_path') IS NOT NULL;
"""


def statements(script: str) -> Iterator[str]:
    """Split a script into statements (trigger bodies included) without executescript's implicit COMMIT."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending.strip()
            pending = ""
