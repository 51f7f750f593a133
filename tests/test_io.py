"""JSONL export/import (lossless, all or nothing), seed history import, and the CLI commands."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

import memkit
from memkit import frames
from memkit.cli import main
from memkit.traces import ExecutionHistory, ExecutionItem, ExecutionStatus


def _fill(mem: memkit.Memory) -> None:
    mem.add("TP53 is mutated in sample 7", "alice", "bio", {"gene": "TP53", "score": 0.5, "tags": ["a", "b"]})
    mem.add("ünïcode ✓ and \"quotes\"", "bob", "chem", {"nested": {"deep": [1, {"x": None}]}})
    mem.add_trace("bio", "wf1", {"tool": "blast", "step_name": "run_blast", "step_index": 0, "result": {"hits": 3}})
    mem.add_many([{"content": "old", "user_id": "alice", "agent_id": "bio",
                   "created_at": datetime(2020, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)}])


def _rows(mem: memkit.Memory) -> list[tuple[object, ...]]:
    return [(i.id, i.user_id, i.agent_id, i.content, i.metadata, i.created_at) for i in mem.export()]


@pytest.mark.parametrize("source", ["memory://", "sqlite"])
@pytest.mark.parametrize("target", ["memory://", "sqlite"])
def test_round_trip_is_lossless(tmp_path: Path, source: str, target: str) -> None:
    src_url = source if source != "sqlite" else f"sqlite:///{tmp_path / 'src.db'}"
    dst_url = target if target != "sqlite" else f"sqlite:///{tmp_path / 'dst.db'}"
    with memkit.open(src_url) as src, memkit.open(dst_url) as dst:
        _fill(src)
        path = tmp_path / "out.jsonl"
        assert memkit.export_jsonl(src, path, progress=False) == 4
        assert memkit.import_jsonl(dst, path, progress=False) == 4
        assert _rows(dst) == _rows(src)
        again = tmp_path / "again.jsonl"
        memkit.export_jsonl(dst, again, progress=False)
        assert again.read_bytes() == path.read_bytes()
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert set(lines[0]) == {"id", "user_id", "agent_id", "content", "metadata", "created_at"}
        assert lines[0]["created_at"] == "2020-01-02T03:04:05.123456+00:00"  # oldest first
        if target == "sqlite":
            assert list(frames.traces_frame(dst)["tool"]) == ["blast"]


def test_export_one_namespace(tmp_path: Path) -> None:
    with memkit.open("memory://") as mem:
        _fill(mem)
        assert memkit.export_jsonl(mem, tmp_path / "a.jsonl", user_id="bob", progress=False) == 1


def test_export_shows_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with memkit.open("memory://") as mem:
        _fill(mem)
        memkit.export_jsonl(mem, tmp_path / "a.jsonl", progress=True)
    assert "export" in capsys.readouterr().err


def test_bad_file_writes_nothing(tmp_path: Path) -> None:
    with memkit.open("memory://") as src:
        _fill(src)
        good = tmp_path / "good.jsonl"
        memkit.export_jsonl(src, good, progress=False)
    lines = good.read_text(encoding="utf-8").splitlines()
    cases = {
        ":3 is not JSON": "{oops",
        "needs user_id": json.dumps({"content": "x", "agent_id": "a"}),
        "unknown fields": json.dumps({"content": "x", "user_id": "u", "agent_id": "a", "color": 1}),
        "ISO 8601": json.dumps({"content": "x", "user_id": "u", "agent_id": "a", "created_at": "yesterday"}),
    }
    for message, bad in cases.items():
        path = tmp_path / "bad.jsonl"
        path.write_text("\n".join([*lines[:2], bad, *lines[2:]]) + "\n", encoding="utf-8")
        with memkit.open("memory://") as dst:
            with pytest.raises(memkit.InvalidInputError, match=message):
                memkit.import_jsonl(dst, path, progress=False)
            assert dst.stats().memories == 0


def test_importing_twice_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'x.db'}") as mem:
        _fill(mem)
        path = tmp_path / "x.jsonl"
        memkit.export_jsonl(mem, path, progress=False)
        with pytest.raises(memkit.InvalidInputError):
            memkit.import_jsonl(mem, path, progress=False)
        assert mem.stats().memories == 4


def _seed_history_file(tmp_path: Path) -> Path:
    history = ExecutionHistory()
    history.add_item(ExecutionItem("run_blast", "blast", ExecutionStatus.SUCCESS, result={"hits": 3},
                                   timestamp=1_700_000_000.0, parameters={"db": "nr", "token": "s3cret"}, duration=1.5))
    history.add_item(ExecutionItem("fetch", "pdb", ExecutionStatus.FAILED, error="network timeout",
                                   timestamp=1_700_000_002.0, retry_count=2))
    history.finish()
    path = tmp_path / "history.json"
    history.save_to_file(path)
    return path


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_import_seed_history(tmp_path: Path, url: str) -> None:
    url = url if url != "sqlite" else f"sqlite:///{tmp_path / 'h.db'}"
    path = _seed_history_file(tmp_path)
    with memkit.open(url) as mem:
        ids = memkit.import_history(mem, path, workflow_id="wf9", agent_id="bio", run_id="r1")
        assert len(ids) == 2
        hits = mem.search("blast", "system", "bio", filters={"type": "trace", "workflow_id": "wf9"})
        assert [h.id for h in hits] == [ids[0]]
        assert "s3cret" not in hits[0].content  # redacted like any add_trace
        df = frames.traces_frame(mem, workflow_id="wf9")
        assert list(df.index) == ids
        assert list(df["step_name"]) == ["run_blast", "fetch"] and list(df["retry_count"]) == [0, 2]
        assert df.iloc[0]["started_at"] == datetime.fromtimestamp(1_700_000_000, tz=UTC)
        assert df.iloc[0]["created_at"] == df.iloc[0]["started_at"]
        assert set(df["run_id"]) == {"r1"}


def test_import_history_rejects_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"items": [{"step_name": "x", "tool": "t", "status": "exploded"}]}')
    with memkit.open("memory://") as mem:
        with pytest.raises(memkit.InvalidInputError, match="exploded"):
            memkit.import_history(mem, bad, workflow_id="wf", agent_id="a")
        with pytest.raises(memkit.InvalidInputError, match="step_name"):
            memkit.import_history(mem, {"items": [{"tool": "t", "status": "success"}]}, workflow_id="wf", agent_id="a")
        bad.write_text("{nope")
        with pytest.raises(memkit.InvalidInputError, match="not JSON"):
            memkit.import_history(mem, bad, workflow_id="wf", agent_id="a")
        assert mem.stats().memories == 0


def test_cli_export_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    with memkit.open(src) as mem:
        _fill(mem)
    out = tmp_path / "dump.jsonl"
    assert main(["--url", src, "export", str(out), "--quiet"]) == 0
    assert main(["--url", dst, "import", str(out), "--quiet"]) == 0
    assert "Imported 4 records" in capsys.readouterr().out
    history = _seed_history_file(tmp_path)
    assert main(["--url", dst, "import", str(history), "--history", "--workflow", "wf", "--agent", "bio",
                 "--quiet"]) == 0
    assert main(["--url", dst, "import", str(history), "--history", "--quiet"]) == 2
    assert main(["--url", dst, "import", str(tmp_path / "missing.jsonl"), "--quiet"]) == 2
    assert "error" in capsys.readouterr().err
    with memkit.open(dst) as mem:
        assert mem.stats().memories == 6 and mem.stats().traces == 3


def test_readme_traces_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    code = readme.split("<!-- readme-traces -->\n```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)  # the README's own example
    df = namespace["df"]
    assert list(df["step_name"]) == ["run_blast", "fetch_pdb"]  # type: ignore[index]
    assert len(namespace["hits"]) == 1  # type: ignore[arg-type]
    assert len(namespace["tools"]) == 7  # type: ignore[arg-type]
    assert (tmp_path / "backup.jsonl").exists() and (tmp_path / "data" / "memory.db").exists()
    assert "sk-1" not in (tmp_path / "backup.jsonl").read_text()
