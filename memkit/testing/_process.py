"""What the test servers (FalkorDB, Neo4j) share: one child process, one scratch folder."""

from __future__ import annotations

import abc
import os
import shutil
import signal
import subprocess
from types import TracebackType
from typing import Self

__all__ = ["ServerProcess"]


class ServerProcess(abc.ABC):
    """A server started in its own process group, with a temporary folder removed by :meth:`stop`."""

    #: Seconds to wait for the process to go after SIGKILL.
    kill_wait: float = 10.0

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self._dir: str | None = None

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
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
