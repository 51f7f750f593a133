"""``memkit runs``, ``memkit show``, ``memkit namespaces``: what a shell script and a person read."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import memkit
from memkit.cli import main
from memkit.traces import ExecutionHistory

HOSTILE = "boom \x1b]0;pwned\x07 \x1b[2J \u202egnp"
T0 = datetime(2026, 10, 1, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'runs.db'}?embedder=none"
    with memkit.open(url) as mem:
        mem.add("TP53 knockdown raises apoptosis", "alice", "bio")
        for r in range(3):
            for i in range(3):
                failed = r == 1 and i == 2
                mem.add_trace("bio", "align", {
                    "step_name": f"step_{i}", "tool": "bwa", "step_index": i, "run_id": f"run-{r}",
                    "status": "failed" if failed else "success", "duration_ms": 1000 * (i + 1),
                    "started_at": T0 + timedelta(hours=r, seconds=10 * i),
                    **({"error": HOSTILE} if failed else {}),
                }, user_id="alice")
        mem.add_trace("bio", "untimed", {"step_name": "s", "step_index": 0, "run_id": "u-1"}, user_id="bob")
        history = ExecutionHistory(memory_provider=mem, workflow_id="review", agent_id="bio",
                                          user_id="alice", run_id="rev-1")
        with history.step("look_up", tool="memory"):
            mem.search("TP53", "alice", "bio", limit=3, mode="keyword")
        history.close()
    return url


def _inert(text: str) -> None:
    assert not any(ch in text for ch in "\x1b\x07\u202e"), repr(text)


def test_runs_lists_newest_first_and_filters(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "runs"]) == 0
    out = capsys.readouterr().out
    _inert(out)
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["run", "started", "status"]
    keys = [line.split()[0] for line in lines[1:]]
    assert keys.index("align/run-2") < keys.index("align/run-1") < keys.index("align/run-0")
    assert "\\x1b]0;pwned\\x07" in out  # the error is visible, escaped
    assert main(["--url", store, "runs", "--status", "failed", "--json"]) == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["run"] == "align/run-1" and row["failed_steps"] == 1 and row["first_error"] == HOSTILE
    assert row["duration_s"] == 23.0  # 20 s from first start to the last step's start, plus its 3 s
    assert main(["--url", store, "runs", "--workflow", "review", "--json"]) == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["recalls"] == 1


def test_runs_exit_codes_a_script_can_use(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "runs", "--status", "running"]) == 1  # nothing matched
    assert "no run matches" in capsys.readouterr().err
    assert main(["--url", store, "runs", "--since", "2100-01-01"]) == 1
    assert main(["--url", store, "runs", "--since", "3d", "--workflow", "review"]) == 0  # written just now
    capsys.readouterr()
    assert main(["--url", store, "runs", "--since", "yesterday"]) == 2
    err = capsys.readouterr().err
    assert "--since must be an ISO date or time" in err and "'yesterday'" in err
    assert main(["--url", store, "runs", "--limit", "0"]) == 2
    with pytest.raises(SystemExit) as bad:
        main(["--url", store, "runs", "--status", "exploded"])
    assert bad.value.code == 2


def test_show_prints_steps_errors_and_recalls(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "show", "align/run-1"]) == 0
    out = capsys.readouterr().out
    _inert(out)
    assert out.startswith("run align/run-1: failed · 3 steps")
    assert "3.0 s" in out and "recorded" in out
    assert "errors:\n  step 2 step_2: boom \\x1b]0;pwned\\x07" in out
    assert main(["--url", store, "show", "rev-1"]) == 0  # a run_id naming one run
    out = capsys.readouterr().out
    assert "recalls:" in out and "search 'TP53' (keyword, alice / bio) -> 1 memories" in out
    assert "TP53 knockdown raises apoptosis" in out
    assert main(["--url", store, "show", "untimed/u-1"]) == 0
    assert "1 of 1 steps recorded no timing" in capsys.readouterr().out


def test_show_json_and_missing_runs(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "show", "review/rev-1", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["status"] == "success" and run["steps"][0]["step_name"] == "look_up"
    assert run["steps"][0]["timing"] == "recorded"
    assert run["recalls"][0]["hits"][0]["content"] == "TP53 knockdown raises apoptosis"
    assert main(["--url", store, "show", "no-such-run"]) == 1
    assert "no run 'no-such-run'" in capsys.readouterr().err
    assert main(["--url", store, "show", "align"]) == 2  # names three runs: say which
    assert "names 3 runs" in capsys.readouterr().err


def test_namespaces(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "namespaces", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {(r["user_id"], r["agent_id"]) for r in rows} == {("alice", "bio"), ("bob", "bio")}
    assert main(["--url", store, "namespaces"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["user", "agent", "memories", "first", "last"]
    assert main(["--url", "memory://", "namespaces"]) == 1


def test_a_bad_json_argument_is_a_clear_error(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "search", "x", "--user", "alice", "--agent", "bio", "--filters", "{gene: TP53}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memkit: error: --filters must be JSON") and "character 1" in err
    assert "Expecting property name enclosed" in err and "Traceback" not in err


def test_memkit_testing_imports_without_pytest() -> None:
    code = ("import sys; sys.modules['pytest'] = None\n"
            "from memkit.testing import FalkorDBServer, Neo4jServer\n"
            "try:\n    from memkit.testing import ProviderConformance\nexcept ImportError:\n    print('lazy')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "lazy"


def test_reading_commands_leave_numpy_and_pandas_unloaded(store: str) -> None:
    """Every command pays for its imports on every call: counts and namespaces need neither."""
    code = ("import sys\nimport memkit\nfrom memkit.cli import main\n"
            "loaded = lambda: sorted(m for m in ('numpy', 'pandas') if m in sys.modules)\n"
            "print('import', loaded())\n"
            "print('stats', main(['--url', sys.argv[1], 'stats']), loaded())\n"
            "print('namespaces', main(['--url', sys.argv[1], 'namespaces']), loaded())\n"
            "print('runs', main(['--url', sys.argv[1], 'runs']), loaded())\n")
    done = subprocess.run([sys.executable, "-c", code, store], capture_output=True, text=True, check=True)
    said = [line for line in done.stdout.splitlines() if line.startswith(("import ", "stats ", "namespaces ", "runs "))]
    # the run table is a runs_frame: pandas, and the numbers it stands on
    assert said == ["import []", "stats 0 []", "namespaces 0 []", "runs 0 ['numpy', 'pandas']"]


def test_lazy_names_are_the_same_objects() -> None:
    code = ("import memkit, memkit._sync, memkit._models, memkit._evaluate\n"
            "ns = {}\nexec('from memkit import *', ns)\n"
            "assert memkit.open is memkit._sync.open and ns['Memory'] is memkit._sync.Memory\n"
            "assert ns['Stats'] is memkit._models.Stats and memkit.evaluate is memkit._evaluate.evaluate\n"
            "assert set(memkit.__all__) <= set(dir(memkit)) and set(memkit.__all__) <= set(ns)\n"
            "try:\n    memkit.no_such_name\nexcept AttributeError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "module 'memkit' has no attribute 'no_such_name'"
