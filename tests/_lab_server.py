"""A JupyterLab server for the browser tests that cannot outlive the test run.

The servers are started in a session of their own (so a Ctrl-C meant for pytest reaches the
fixture's teardown, not the server directly). A ``finally`` block does not run when pytest is
killed (SIGKILL, an out-of-memory kill, a CI timeout), and such a server then kept its port, its
kernels and their memory. :class:`memkit.testing`'s server base arms a watchdog that stops the
process group when this process ends in any way; JupyterLab reuses it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Self

from memkit.testing._process import ServerProcess

__all__ = ["LabServer"]


class LabServer(ServerProcess):
    """``command`` run in its own process group, its output in ``log``; ready once ``ready(log text)`` is true.

    ``ready`` returns ``None`` while the server is starting, else what the test needs (a URL).
    """

    def __init__(self, command: Sequence[str], log: Path, ready: Callable[[str], str | None], *,
                 env: Mapping[str, str] | None = None, timeout: float = 180.0) -> None:
        super().__init__()
        self._command = list(command)
        self._log_path = log
        self._ready = ready
        self._env = dict(env) if env is not None else None
        self._timeout = timeout
        self._log: IO[str] | None = None
        self.url = ""

    def log_text(self) -> str:
        return self._log_path.read_text() if self._log_path.exists() else ""

    def start(self) -> Self:
        self._log = self._log_path.open("w+")
        self.process = subprocess.Popen(self._command, stdout=self._log, stderr=subprocess.STDOUT,
                                        env=self._env, start_new_session=True)
        try:
            deadline = time.monotonic() + self._timeout
            while True:
                assert self.process.poll() is None, self.log_text()
                found = self._ready(self.log_text())
                if found:
                    self.url = found
                    return self
                assert time.monotonic() < deadline, f"not ready after {self._timeout:.0f} s:\n{self.log_text()}"
                time.sleep(0.5)
        except BaseException:
            self.stop()
            raise

    def _halt(self) -> None:
        process = self.process
        if process is not None:
            # The group, not only its leader: ``make`` or jupyter may have gone while a kernel lives.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None


def lab_url(port: int) -> Callable[[str], str | None]:
    """``ready`` for ``jupyter lab`` (or ``make lab-serve``): the tokened URL it prints, once it has."""
    pattern = re.compile(rf"http://127\.0\.0\.1:{port}/lab\?token=\w+")

    def ready(log: str) -> str | None:
        found = pattern.search(log)
        return found.group(0) if found else None

    return ready
