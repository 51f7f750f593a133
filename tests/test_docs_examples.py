"""Every ```python block in README.md and docs/*.md runs as written (issue 42).

The convention, for whoever adds an example (docs/architecture.md says the same):

* A ```python block is a program: it runs alone, in a fresh interpreter, in an empty temporary
  directory, without ``$MEMKIT_URL``, with the ``memkit`` command on ``PATH``. It defines or
  imports every name it uses.
* ``<!-- continues -->`` on the line just before the fence makes the block the continuation of
  the file's ```python block before it: the chain runs as one program, in one interpreter.
* ``<!-- needs: postgres -->`` (or ``neo4j``, ``falkordb``, ``mem0-cloud``; several separated by
  commas) before the fence: the block's URLs of that kind (``postgresql://…``, ``neo4j://…``/
  ``bolt://…``, ``falkordb://…``, ``mem0+cloud://api.mem0.ai``/``https://api.mem0.ai``) are
  replaced by the session's test server from tests/conftest.py (for mem0-cloud, the stand-in
  platform of tests/test_mem0_cloud.py, its key in ``$MEM0_API_KEY``), so the example can show a
  real deployment's URL. A marker may combine both:
  ``<!-- continues; needs: postgres -->``.
* Code that is not a runnable program (a config's shape with placeholders, a shell session) uses
  another fence (```text, ```bash, ```json): only ```python blocks are run here.

Other HTML comments before a fence (section anchors other tests look for) are left alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_MARKER = re.compile(r"<!--\s*((?:continues|needs:)[^>]*?)\s*-->")
_SERVERS = {
    "postgres": re.compile(r"postgres(?:ql)?://[^\s\"'`)]+"),
    "neo4j": re.compile(r"(?:neo4j|bolt)(?:\+s)?://[^\s\"'`)]+"),
    "falkordb": re.compile(r"falkordb://[^\s\"'`)]+"),
    # The Mem0 platform's address, in a URL or as base_url: the stand-in of test_mem0_cloud.py.
    "mem0-cloud": re.compile(r"(?:mem0\+cloud|https)://api\.mem0\.ai\b"),
}


@dataclass
class Example:
    """One program: a block and the blocks that continue it."""

    where: str
    code: str
    needs: set[str] = field(default_factory=set)


def _markers(text: str, fence_start: int) -> tuple[bool, set[str]]:
    """What the HTML comments just above a fence say: a continuation, and which servers it needs."""
    continues, needs = False, set()
    for line in reversed(text[:fence_start].rstrip("\n").splitlines()):
        if not line.strip().startswith("<!--"):
            break
        for marker in _MARKER.findall(line):
            for part in marker.split(";"):
                word, _, rest = part.strip().partition(":")
                if word == "continues":
                    continues = True
                elif word == "needs":
                    needs |= {name.strip() for name in rest.split(",") if name.strip()}
    return continues, needs


def examples() -> list[Example]:
    found: list[Example] = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        first_of_file = len(found)
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            where = f"{doc.relative_to(ROOT)}:{line}"
            continues, needs = _markers(text, match.start())
            unknown = needs - set(_SERVERS)
            assert not unknown, f"{where}: unknown server(s) {sorted(unknown)} in a needs: marker"
            if continues:
                assert len(found) > first_of_file, f"{where} continues, but is the file's first python block"
                found[-1].code += f"\n# --- {where}\n" + match.group(1)
                found[-1].needs |= needs
            else:
                found.append(Example(where, f"# --- {where}\n" + match.group(1), needs))
    return found


EXAMPLES = examples()


def test_the_docs_hold_the_examples_this_test_runs() -> None:
    # A broken fence pattern would run nothing and pass.
    assert len(EXAMPLES) >= 20
    assert any(e.where.startswith("README.md") for e in EXAMPLES)
    assert {"postgres", "mem0-cloud"} <= {need for e in EXAMPLES for need in e.needs}
    # Python under another fence (indented, ```py) would be shown and never run.
    for doc in DOCS:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            hidden = re.match(r"\s+```python|\s*```(?:py|python3|pycon|ipython)\s*$", line)
            assert hidden is None, f"{doc.relative_to(ROOT)}:{number}: start a Python block with ```python at column 0"


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.where for e in EXAMPLES])
def test_every_python_example_in_the_docs_runs(example: Example, tmp_path: Path,
                                               request: pytest.FixtureRequest) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMKIT_", "MEM0_"))}
    # This checkout's memkit (not whichever one is installed), and the `memkit` command the
    # package installs next to this interpreter.
    env["PYTHONPATH"] = str(ROOT)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    code = example.code
    with contextlib.ExitStack() as servers:
        for need in sorted(example.needs):
            url = _server_url(need, request, example.where, servers, env)
            code = _SERVERS[need].sub(lambda m, url=url: _address(m.group(), url), code)
        script = tmp_path / "example.py"
        script.write_text(code, encoding="utf-8")
        result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=600)
    assert result.returncode == 0, f"{example.where} failed:\n{result.stderr[-4000:]}"



def _server_url(need: str, request: pytest.FixtureRequest, where: str, servers: contextlib.ExitStack,
                env: dict[str, str]) -> str:
    """The test server's URL, with a database or graph of the example's own where the server has them."""
    name = re.sub(r"[^a-z0-9_]", "_", f"docs_{where}".lower())[:63]
    if need == "postgres":
        return str(request.getfixturevalue("postgres_server").url(name))
    if need == "falkordb":
        return str(request.getfixturevalue("falkordb_server").url(name))
    if need == "neo4j":
        return str(request.getfixturevalue("neo4j_uri"))
    from test_mem0_cloud import API_KEY, _handler, _Platform

    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(_Platform()))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    servers.callback(server.server_close)
    servers.callback(server.shutdown)
    env["MEM0_API_KEY"] = API_KEY
    return f"http://127.0.0.1:{server.server_address[1]}"


def _address(found: str, url: str) -> str:
    """``url`` in place of ``found``, in the spelling ``found`` had (a mem0+cloud URL says plain http)."""
    if found.startswith("mem0+cloud://"):
        return f"mem0+cloud://{url.removeprefix('http://')}?tls=0"
    return url
