"""What the test servers (FalkorDB, Neo4j, PostgreSQL) share: one child process, one scratch folder.

A server runs in a session of its own, so a Ctrl-C or a SIGTERM sent to the process that started
it does not reach it. Without more, a test run killed from outside (SIGTERM, SIGKILL, a crash)
would leave its servers running and their folders on disk. Each server therefore gets a watchdog:
a small Python process holding the read end of a pipe whose write end only the owner holds. When
the owner ends in any way, the kernel closes the pipe and the watchdog stops the server and deletes
its folder; a :meth:`ServerProcess.stop` (or any other hand-over of ``process``) tells the
watchdog to stand down first. No signal handler is installed, so pytest's, a notebook kernel's
and the caller's own handling of signals are untouched.

One limit: a process ``os.fork``-ed by the owner (not ``subprocess``) inherits the pipe's write
end, and the watchdog waits until that process has ended as well.
"""

from __future__ import annotations

import abc
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from types import TracebackType
from typing import Self

__all__ = ["ServerProcess"]

# Run as ``python -I -S -c WATCHDOG pid folder``: standard library only, so it starts in tens of
# milliseconds and works from any environment. A byte on stdin means "stand down"; end of file
# without one means the owner is gone. The server is only signalled while it is still the process
# that was started (same pid and start time): once it has gone, its pid may belong to another.
WATCHDOG = r"""
import os, shutil, signal, sys, time
pid, folder = int(sys.argv[1]), sys.argv[2]

def started():
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]

def group_alive():
    try:
        os.killpg(pid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False

first = started() if os.path.isdir("/proc") else "-"
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.read(0, 1):
    sys.exit(0)

def ours():
    if first == "-":
        return True
    now = started()
    # The leader gone while its group lives: the group id cannot have been reused.
    return now == first or (now is None and first is not None and group_alive())

for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
    if not ours():
        break
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        break
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and group_alive() and started() is not None:
        time.sleep(0.05)
if folder:
    shutil.rmtree(folder, ignore_errors=True)
"""


class _Watchdog:
    """The watchdog of one server process: stops it and deletes ``folder`` if this process ends first."""

    def __init__(self, server: subprocess.Popen[bytes], folder: str | None) -> None:
        read, self._write = os.pipe()  # both not inheritable: no other child of ours gets the write end
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", WATCHDOG, str(server.pid), folder or ""],
                stdin=read, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )
        except BaseException:
            os.close(self._write)
            raise
        finally:
            os.close(read)

    def stand_down(self) -> None:
        """The owner took care of the server: the watchdog exits and touches nothing."""
        with contextlib.suppress(OSError):
            os.write(self._write, b"x")
        with contextlib.suppress(OSError):
            os.close(self._write)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


class ServerProcess(abc.ABC):
    """A server started in its own process group, with a temporary folder removed by :meth:`stop`.

    Subclasses assign the started server to ``process``; that arms a watchdog which stops the server
    and deletes the folder if this Python process ends without :meth:`stop` (killed by a signal,
    crashed). Assigning ``None`` or another process disarms it.
    """

    #: Seconds to wait for the process to go after SIGKILL.
    kill_wait: float = 10.0

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._watchdog: _Watchdog | None = None
        self._dir: str | None = None

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The running server, or ``None``."""
        return self._process

    @process.setter
    def process(self, value: subprocess.Popen[bytes] | None) -> None:
        if value is self._process:
            return
        if self._watchdog is not None:
            watchdog, self._watchdog = self._watchdog, None
            watchdog.stand_down()
        self._process = value
        if value is not None and value.poll() is None:
            try:
                self._watchdog = _Watchdog(value, self._dir)
            except BaseException:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(value.pid, signal.SIGKILL)
                value.wait(timeout=self.kill_wait)
                self._process = None
                raise

    @abc.abstractmethod
    def start(self) -> Self:
        """Start the server; raise ``RuntimeError`` saying why when it does not come up."""

    @abc.abstractmethod
    def _halt(self) -> None:
        """Stop the process cleanly, keeping the folder."""

    def kill(self) -> None:
        """Kill the server abruptly (SIGKILL), as a crash would; its folder stays for :meth:`restart`."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=self.kill_wait)

    def restart(self) -> Self:
        """Start again on the same port and folder (the server recovers what it persisted)."""
        self._halt()
        return self.start()

    def stop(self) -> None:
        """Stop the server and delete its folder."""
        self._halt()
        self.process = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
