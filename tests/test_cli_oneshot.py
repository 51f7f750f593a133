"""The command line's one-shot reads: on SQLite, ``runs``, ``show``, ``namespaces``, ``stats`` and ``search``
(every mode, keyword-only or default-embedder store) load neither pydantic nor asyncio; what the store
must do itself (open a new file, search vectors of another embedder, refuse an argument) it does."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli_runs import _researchers_store

import memkit
from memkit._serve._runs import open_reads, read_runs
from memkit.adapters._sqlite._reads import SQLiteReads
from memkit.cli import main
from memkit.store import _registry


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('oneshot') / 'r.db'}?embedder=none"
    with _researchers_store(url) as mem:  # two users sharing workflow ids, recalls, marks, odd timings
        for i in range(30):
            mem.add(f"note {i} on TP53 and BRCA{i % 3}", "alice", "bio", {"gene": f"BRCA{i % 3}", "n": i})
        mem.add("bob's own TP53 note", "bob", "bio")
        mem.add("TP53 naïve Ω \u202e note", "alice", "bio",
                {"gene": "BRCA1", "tags": ["a", "ü"], "nested": {"x": 1.5, "flag": True, "none": None, "big": 2**62}})
        # several marks on one run's recalls (shown oldest first), one with a note
        for user in ("alice", "bob"):
            recalls = [r for r in mem.recalls(user_id=user, agent_id="bio") if r.run_id is not None]
            run = recalls[0].run_id
            for n, recall in enumerate(r for r in recalls if r.run_id == run):
                mem.mark_memory(recall.id, recall.hits[0].id, relevant=n % 2 == 0, user_id=user, agent_id="bio",
                                note=f"checked {n}" if n == 1 else "")
    yield url


def _printed(url: str, args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["--url", url, *args])
    out, err = capsys.readouterr()
    return code, out, err


SEARCH = ["search", "TP53", "--user", "alice", "--agent", "bio"]


@pytest.mark.parametrize("way", ["file", "port"])
def test_show_prints_a_runs_own_recalls_and_the_marks_on_them(
    way: str, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each run, read from the file or through the store's port: the recalls its steps made in its own
    namespace (two users run the same workflows), each hit as recorded, and the marks on its steps and hits."""
    url = store if way == "file" else store + "&record_recalls=true"  # an option only the store itself takes
    assert (_registry.one_shot_reads(url) is None) == (way == "port")
    code, out, _ = _printed(url, ["runs", "--json", "--limit", "1000"], capsys)
    runs = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(runs) > 30
    with memkit.open(store) as mem:
        recalls = {r.id: r for r in mem.recalls()}
        marks = {m.id: m for m in mem.marks()}
    shown_recalls, shown_marks = set(), set()
    for run in runs:
        code, out, _ = _printed(url, ["show", run["run"], "--json"], capsys)
        detail = json.loads(out)
        assert code == 0 and len(detail["steps"]) == run["steps"]
        steps = {s["step_id"] for s in detail["steps"]}
        for shown in detail["recalls"]:
            kept = recalls[shown["recall_id"]]
            assert (kept.workflow_id, kept.run_id) == (run["workflow_id"], run["run_id"])
            assert (kept.trace_user_id, kept.trace_agent_id) == (run["user_id"], run["agent_id"])
            assert shown["created_at"] == kept.created_at.isoformat() and shown["query"] == kept.query
            assert [(h["rank"], h["memory_id"], h["score"], h["content"]) for h in shown["hits"]] == [
                (h.rank, h.id, h.score, h.content) for h in kept.hits]
            shown_recalls.add(kept.id)
        for shown in detail["marks"]:
            kept_mark = marks[shown["mark_id"]]
            assert kept_mark.step_id in steps or kept_mark.recall_id in {r["recall_id"] for r in detail["recalls"]}
            assert (shown["label"], shown["kind"], shown["note"]) == (kept_mark.label, kept_mark.kind, kept_mark.note)
            assert shown["created_at"] == kept_mark.created_at.isoformat()
            shown_marks.add(kept_mark.id)
        for hit in (h for r in detail["recalls"] for h in r["hits"] if h["mark"] is not None):
            assert hit["mark"] in ("relevant", "not_relevant")
        code, text, _ = _printed(url, ["show", run["run"]], capsys)
        assert code == 0 and text.count("\n    ") >= sum(len(r["hits"]) for r in detail["recalls"])
        assert ("checked 1" in text) == any(m["note"] == "checked 1" for m in detail["marks"])
    # every recall made within a run, and every mark on one, is shown with its run
    assert shown_recalls == {r.id for r in recalls.values() if r.run_id is not None or r.workflow_id is not None}
    assert shown_marks == set(marks)


@pytest.mark.parametrize("way", ["file", "port"])
def test_namespaces_stats_and_search_print_the_stores_answers(
    way: str, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = store if way == "file" else store + "&record_recalls=true"
    with memkit.open(store) as mem:
        spaces, stats = mem.namespaces(), mem.stats()
    code, out, _ = _printed(url, ["namespaces", "--json"], capsys)
    assert code == 0 and [json.loads(line) for line in out.splitlines()] == [
        {**ns.model_dump(), "first_at": ns.first_at and ns.first_at.isoformat(),
         "last_at": ns.last_at and ns.last_at.isoformat()} for ns in spaces]
    code, out, _ = _printed(url, ["stats"], capsys)
    assert code == 0 and json.loads(out) == json.loads(stats.model_dump_json())
    code, out, _ = _printed(url, [*SEARCH, "--limit", "50", "--json", "--filters", '{"gene": "BRCA1"}'], capsys)
    hits = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(hits) > 5 and all(h["metadata"]["gene"] == "BRCA1" for h in hits)
    assert all((h["user_id"], h["agent_id"]) == ("alice", "bio") and "TP53" in h["content"] for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert all(h["created_at"].endswith("Z") and h["score_details"]["mode"] == "keyword" for h in hits)
    naive = next(h for h in hits if "naïve" in h["content"])
    assert naive["metadata"]["nested"] == {"x": 1.5, "flag": True, "none": None, "big": 2**62}
    code, out, _ = _printed(url, [*SEARCH, "--limit", "3"], capsys)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3 and all(line.split()[1] in {h["id"] for h in hits} or "BRCA1" not in line
                                                 for line in lines)
    assert "\\u202e" in _printed(url, ["search", "naïve", "--user", "alice", "--agent", "bio"], capsys)[1]
    for refused, said in ((["--limit", "0"], "limit"), (["--mode", "semantic"], "semantic"),
                          (["--filters", '{"gene": {"$regex": "x"}}'], "$regex")):
        code, out, err = _printed(url, [*SEARCH, *refused], capsys)
        assert (code, out) == (2, "") and said in err, refused


def test_the_commands_answered_by_one_shot_reads_are(store: str) -> None:
    """What the equality tests above compare: the one-shot reads answer these, not the store."""
    with open_reads(store) as reads:
        assert isinstance(reads, SQLiteReads)
        assert reads.search("TP53", "alice", "bio", 5, {"gene": "BRCA1"}, None)
        assert reads.search("TP53", "alice", "bio", 5, None, "keyword")
        for refused in (("", "alice", "bio", 5, None, None), ("TP53", "alice", "bio", 0, None, None),
                        ("TP53", "alice", "bio", 5, None, "semantic"), ("TP53", "alice", "bio", 5, {"$x": 1}, None)):
            assert reads.search(*refused) is None  # the store says what is wrong


def test_read_commands_load_neither_pydantic_nor_asyncio(store: str) -> None:
    """The promise the one-shot reads keep: each reading command on SQLite, in a fresh process,
    leaves pydantic, asyncio and the store's models unloaded (and numpy for all but search)."""
    heavy = ("pydantic", "pydantic_core", "asyncio", "memkit._core._models", "memkit._sync", "memkit.store._base",
             "memkit.adapters._sqlite._adapter", "numpy", "pandas")
    code = ("import sys\nfrom memkit.cli import main\n"
            f"heavy = {heavy!r}\n"
            "args = sys.argv[2:]\n"
            "code = main(['--url', sys.argv[1], *args])\n"
            "print('LOADED', code, sorted(m for m in heavy if m in sys.modules))\n")
    with open_reads(store) as reads:
        runs = read_runs(reads)
    shared = next(r.key for r in runs if r.key.startswith("alice/") and r.recalls)  # a workflow bob runs too
    marked = next(r.key for r in runs if r.marks and r.recalls)
    for args in (["runs"], ["runs", "--status", "failed", "--json"], ["show", shared], ["show", marked, "--json"],
                 ["namespaces"], ["namespaces", "--json"], ["stats"],
                 SEARCH, [*SEARCH, "--json", "--filters", '{"gene": "BRCA1"}']):
        done = subprocess.run([sys.executable, "-c", code, store, *args], capture_output=True, text=True, check=True)
        [said] = [line for line in done.stdout.splitlines() if line.startswith("LOADED ")]
        assert said == ("LOADED 0 ['numpy']" if args[0] == "search" else "LOADED 0 []"), (args, said)


def test_what_the_store_must_open_goes_through_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file not there yet, not memkit's, in RAM, or opened with options that make opening do
    something: read through the store as before, with its answers and exit codes."""
    new = tmp_path / "new.db"
    assert _registry.one_shot_reads(f"sqlite:///{new}") is None
    assert _printed(f"sqlite:///{new}", ["runs"], capsys)[:2] == (1, "")  # created, holds no traces
    assert new.exists()
    with open_reads(f"sqlite:///{new}") as reads:  # now a memkit file of this version
        assert isinstance(reads, SQLiteReads)
    for url in ("sqlite://", f"sqlite:///{new}?record_recalls=true", f"sqlite:///{new}?embedder=default",
                f"sqlite:///{new}?busy_timeout_ms=x", f"sqlite:///{new}?nonsense=1", "memory://", "nope://x"):
        assert _registry.one_shot_reads(url) is None, url
    assert isinstance(_registry.one_shot_reads(f"sqlite:///{new}?embedder=none&busy_timeout_ms=50"), SQLiteReads)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    assert _registry.one_shot_reads(f"sqlite:///{junk}") is None
    code, out, err = _printed(f"sqlite:///{junk}", ["stats"], capsys)
    assert code == 2 and out == "" and "not a usable memkit database" in err


@pytest.fixture(scope="module")
def vector_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A store opened with the defaults (the shipped static embedder: hybrid search), two users' namespaces
    on the same words; a saved snapshot (over a thousand memories written), then memories past it and a
    deletion, which a later process replays from the change feed."""
    url = f"sqlite:///{tmp_path_factory.mktemp('oneshot') / 'v.db'}"
    genes = ("TP53", "BRCA2", "EGFR")
    with memkit.open(url) as mem:
        for user in ("alice", "bob"):
            mem.add_many([{"content": f"{user} step {i}: blast on gene {genes[i % 3]} gave result {i}",
                           "user_id": user, "agent_id": "bio", "metadata": {"gene": genes[i % 3], "n": i}}
                          for i in range(1_200)])
    with memkit.open(url) as mem:
        later = [mem.add(f"alice later TP53 pubmed note {i}", "alice", "bio", {"gene": "TP53", "n": -i})
                 for i in range(5)]
        mem.add("bob later TP53 pubmed note", "bob", "bio", {"gene": "TP53"})
        mem.delete(later[0], user_id="alice", agent_id="bio")
    yield url


VSEARCH = ["search", "TP53 blast result", "--user", "alice", "--agent", "bio"]
VECTOR_SEARCHES = [
    [*VSEARCH, *mode, *more] for mode in ([], ["--mode", "hybrid"], ["--mode", "keyword"], ["--mode", "semantic"])
    for more in ([], ["--json"], ["--limit", "40", "--json"], ["--filters", '{"gene": "TP53"}', "--json"])
] + [["search", "pubmed note", "--user", "bob", "--agent", "bio", "--json", *mode]
     for mode in ([], ["--mode", "keyword"], ["--mode", "semantic"])]


@pytest.mark.parametrize("args", VECTOR_SEARCHES, ids=[" ".join(a[1:]) for a in VECTOR_SEARCHES])
def test_a_default_store_is_searched_in_every_mode_as_the_store_searches(
    args: list[str], vector_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    user, mode = args[3], args[args.index("--mode") + 1] if "--mode" in args else None
    with open_reads(vector_store) as reads:  # answered by the one-shot reads, not handed to the store
        assert reads.search(args[1], user, "bio", 5, None, mode)
    fast = _printed(vector_store, args, capsys)
    assert fast[0] == 0 and fast[1]
    if "--json" in args:
        hits = [json.loads(line) for line in fast[1].splitlines()]
        assert all(h["user_id"] == user and h["content"].startswith(user) for h in hits)  # never the other's
        assert {h["score_details"]["mode"] for h in hits} == {mode or "hybrid"}


def test_a_default_store_search_loads_neither_pydantic_nor_asyncio(vector_store: str) -> None:
    code = ("import sys\nfrom memkit.cli import main\n"
            "code = main(['--url', sys.argv[1], *sys.argv[2:]])\n"
            "print('LOADED', code, sorted(m for m in ('pydantic', 'pydantic_core', 'asyncio', 'memkit._core._models',"
            " 'memkit.store._base', 'memkit.adapters._sqlite._adapter', 'numpy') if m in sys.modules))\n")
    for mode in ("hybrid", "keyword", "semantic"):
        done = subprocess.run([sys.executable, "-c", code, vector_store, *VSEARCH, "--mode", mode],
                              capture_output=True, text=True, check=True)
        assert done.stdout.splitlines()[-1] == "LOADED 0 ['numpy']", mode


def test_vectors_of_another_embedder_are_searched_by_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Opening binds the embedder the file names: one the one-shot reads do not load goes to the store."""
    url = f"sqlite:///{tmp_path / 'vectors.db'}"
    with memkit.open(url) as mem:
        for i in range(20):
            mem.add(f"TP53 note {i}", "alice", "bio")
    with open_reads(url) as reads:
        assert reads.search("TP53", "alice", "bio", 5, None, None)
        assert reads.stats()["vectors"] == 20
    with sqlite3.connect(tmp_path / "vectors.db") as db:
        db.execute("UPDATE store_meta SET value = '7' WHERE key = 'embedder_dim'")
    with open_reads(url) as reads:
        assert reads.search("TP53", "alice", "bio", 5, None, None) is None
    fast = _printed(url, [*SEARCH, "--json"], capsys)
    assert fast[:2] == (2, "") and "dim 7" in fast[2]  # the store's own refusal
