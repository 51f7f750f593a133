"""Start a throwaway Neo4j (an embedded DBMS with Bolt, from ``neo4j/`` in the repository).

The launcher is a small Java program built with Maven (``make neo4j``, or on the
first start here); it needs a JDK 17+ and Maven. Neo4j itself comes from Maven
Central as ordinary dependencies, resolved once into ``~/.m2``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import zlib
from pathlib import Path

from memkit.testing._process import ServerProcess

__all__ = ["NEO4J_CURRENT", "NEO4J_LTS", "Neo4jServer"]

# The versions neo4j/pom.xml builds: the default (LTS, Java 17+) and the profile neo4j-2026 (Java 21+).
NEO4J_LTS = "5.26.30"
NEO4J_CURRENT = "2026.08.1"
_PROFILES = {NEO4J_LTS: None, NEO4J_CURRENT: "neo4j-2026"}
_JAVA_FOR = {NEO4J_LTS: 17, NEO4J_CURRENT: 21}

_READY = re.compile(r"memkit-neo4j ready version=(\S+) edition=(\S+) bolt=bolt://([\d.]+):(\d+) startup_ms=(\d+)")


def _project_dir() -> Path:
    """``neo4j/`` beside the ``memkit`` package (a source checkout or an editable install)."""
    configured = os.environ.get("MEMKIT_NEO4J_LAUNCHER")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[2] / "neo4j"


def _java_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)', out.stderr + out.stdout)
    return int(match.group(1)) if match else None


class Neo4jServer(ServerProcess):
    """A real Neo4j on a free loopback port, auth off, data in a temporary folder.

    ``start()`` raises ``RuntimeError`` saying why when the server does not come
    up (no Java, no Maven to build the launcher, a port taken, Neo4j failing),
    with the server's output and the tail of its ``debug.log``: a test run that
    needs it fails instead of skipping.

    Parameters
    ----------
    port
        Bolt port (default: a free one, chosen by the server).
    version
        ``NEO4J_LTS`` (5.26, the default) or ``NEO4J_CURRENT`` (Java 21+);
        default ``$MEMKIT_NEO4J_VERSION`` or the LTS.
    java
        The ``java`` to run it with; default ``$JAVA_HOME/bin/java`` or ``java`` on the PATH.
    heap
        JVM heap (``-Xmx``), e.g. ``"1g"``.
    quick_start
        Start in about half the CPU time: only the JVM's quick compiler, and a class-data
        archive written beside the jar on the first clean stop. Benchmarks turn it off to
        measure Neo4j at full speed.

    Examples
    --------
    >>> with Neo4jServer() as server:                 # doctest: +SKIP
    ...     mem = memkit.open(server.url)
    """

    kill_wait = 30.0

    def __init__(self, port: int | None = None, startup_timeout: float = 300.0, *, version: str | None = None,
                 java: str | None = None, heap: str = "1g", quick_start: bool = True) -> None:
        super().__init__()
        self.version = version or os.environ.get("MEMKIT_NEO4J_VERSION") or NEO4J_LTS
        if self.version not in _PROFILES:
            raise ValueError(f"Neo4j version must be one of {', '.join(_PROFILES)}, got {self.version!r}")
        self.port = port or 0
        self.host = "127.0.0.1"
        self.startup_timeout = startup_timeout
        self.java = java
        self.heap = heap
        self.quick_start = quick_start
        self._archive: tuple[Path, Path] | None = None  # (being written, final)
        self.server_version: str | None = None
        self.edition: str | None = None
        self.startup_seconds: float | None = None

    @property
    def uri(self) -> str:
        """The Bolt address, for the ``neo4j`` driver."""
        return f"bolt://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The memkit URL (``memkit.open(server.url)``)."""
        return self.uri

    @property
    def log_path(self) -> Path | None:
        return Path(self._dir) / "launcher.log" if self._dir else None

    # -- finding Java and the launcher ------------------------------------------------

    def java_binary(self) -> str:
        java = self.java
        if java is None and os.environ.get("JAVA_HOME"):
            java = str(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
        java = java or shutil.which("java")
        need = _JAVA_FOR[self.version]
        if java is None or not os.path.exists(java):
            raise RuntimeError(
                f"Neo4j {self.version} needs Java {need} or newer and none was found:"
                f" install a JDK (Debian: apt-get install openjdk-{max(need, 17)}-jdk-headless) or set JAVA_HOME"
            )
        major = _java_major(java)
        if major is None or major < need:
            raise RuntimeError(f"Neo4j {self.version} needs Java {need} or newer; {java} is Java {major}")
        return java

    def jar(self, *, build: bool = True) -> Path:
        """The launcher jar for this version, built with Maven if it is not there yet."""
        project = _project_dir()
        jar = project / "target" / self.version / "memkit-neo4j.jar"
        if jar.exists():
            return jar
        if not build:
            raise RuntimeError(f"the Neo4j launcher is not built: {jar} is missing (run make neo4j)")
        if not (project / "pom.xml").exists():
            raise RuntimeError(
                f"the Neo4j launcher's sources are not at {project}; set MEMKIT_NEO4J_LAUNCHER to the neo4j/"
                " folder of a memkit checkout"
            )
        self.build(project)
        if not jar.exists():
            raise RuntimeError(f"mvn package ran but did not produce {jar}")
        return jar

    def build(self, project: Path) -> None:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError(
                "building the Neo4j launcher needs Maven: install it (Debian: apt-get install maven)"
                " or run make neo4j on a machine that has it"
            )
        java = self.java_binary()
        profile = _PROFILES[self.version]
        env = {**os.environ, "JAVA_HOME": str(Path(os.path.realpath(java)).parents[1])}
        cmd = [mvn, "-q", "-B", "-Dstyle.color=never", "package", *(["-P", profile] if profile else [])]
        done = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(
                f"building the Neo4j launcher failed ({' '.join(cmd)} in {project}):\n"
                f"{(done.stdout + done.stderr)[-3000:]}"
            )

    # -- running ------------------------------------------------------------------------

    def start(self) -> Neo4jServer:
        java, jar = self.java_binary(), self.jar()
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="memkit-neo4j-")
        log = Path(self._dir) / "launcher.log"
        offset = log.stat().st_size if log.exists() else 0
        options = [f"-Xmx{self.heap}", f"-Xms{min(256, _megabytes(self.heap))}m", "-XX:+UseSerialGC",
                   "-Dfile.encoding=UTF-8", *self._quick_start_options(java, jar)]
        started = time.monotonic()
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                [java, *options, "-jar", str(jar), "--data", str(Path(self._dir) / "db"), "--port", str(self.port)],
                stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = started + self.startup_timeout
        while time.monotonic() < deadline:
            text = log.read_bytes()[offset:].decode(errors="replace")
            match = _READY.search(text)
            if match:
                self.server_version, self.edition = match.group(1), match.group(2)
                self.port = int(match.group(4))
                self.startup_seconds = time.monotonic() - started
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        else:
            text = log.read_bytes()[offset:].decode(errors="replace")
        details = self._failure_details(text)
        self.stop()
        raise RuntimeError(
            f"Neo4j {self.version} did not start on {self.host}:{self.port or '(free port)'}"
            f" within {self.startup_timeout:.0f} s; {details}"
        )

    def _quick_start_options(self, java: str, jar: Path) -> list[str]:
        if not self.quick_start:
            return []
        # A class-data archive only fits the JVM and jar it was made with: name it after both.
        tag = f"{zlib.crc32(os.path.realpath(java).encode()):08x}-{jar.stat().st_mtime_ns}"
        archive = jar.with_name(f"memkit-neo4j-{tag}.jsa")
        options = ["-XX:TieredStopAtLevel=1", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
        if archive.exists():
            return [*options, f"-XX:SharedArchiveFile={archive}"]
        if os.access(jar.parent, os.W_OK):
            partial = archive.with_name(f"{archive.name}.{os.getpid()}-{id(self)}.part")
            self._archive = (partial, archive)
            return [*options, f"-XX:ArchiveClassesAtExit={partial}"]
        return options

    def _failure_details(self, output: str) -> str:
        debug = Path(self._dir or ".") / "db" / "logs" / "debug.log"
        tail = ""
        if debug.exists():
            lines = debug.read_text(errors="replace").splitlines()
            tail = "\n".join(ln for ln in lines if " ERROR " in ln or " WARN " in ln)[-2000:] or "\n".join(lines[-20:])
        return f"launcher output:\n{output[-3000:]}\ndebug.log:\n{tail}"

    def _halt(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            # End of standard input asks the launcher to shut the DBMS down cleanly.
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=30)
        elif process.stdin is not None:
            process.stdin.close()
        if self._archive is not None:
            partial, archive = self._archive
            self._archive = None
            if process.returncode == 0 and partial.exists():
                os.replace(partial, archive)
                for stale in archive.parent.glob("memkit-neo4j-*.jsa"):  # made for an older jar
                    if stale != archive:
                        stale.unlink(missing_ok=True)
            else:
                partial.unlink(missing_ok=True)



def _megabytes(size: str) -> int:
    match = re.fullmatch(r"(\d+)([kmgKMG]?)", size)
    if not match:
        raise ValueError(f"heap must look like 512m or 2g, got {size!r}")
    number, unit = int(match.group(1)), match.group(2).lower()
    return {"k": number // 1024, "m": number, "g": number * 1024, "": number // (1024 * 1024)}[unit]
