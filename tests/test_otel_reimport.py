"""Imported ids are per namespace, and a re-import is refused the same way for every file (issue 40, item 3).

Two users importing the same file each get its steps and recalls (recall ids used to be the bare trace
and span ids, so the second import was refused, telling its user the first had the file); importing
a file again into the same namespace and workflow is refused, with or without retriever spans (a file
without them used to be stored twice), and changes nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("openinference.instrumentation.langchain", reason="needs memkit[dev]")
pytest.importorskip("openinference.instrumentation.openai", reason="needs memkit[dev]")

import memkit
from memkit.otel import import_otlp, spans_to_otlp
from tests.otel_corpus import make_spans


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A LangGraph agent's trace (a retriever span in it) and OpenAI SDK calls' (none)."""
    folder = tmp_path_factory.mktemp("reimport")
    made = {}
    for name in ("langgraph-openinference", "openai-openinference"):
        path = folder / f"{name}.json"
        path.write_text(json.dumps(spans_to_otlp(make_spans(name))))
        made[name] = path
    return made


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[memkit.Memory]:
    if request.param == "memory":
        url = "memory://"
    elif request.param.startswith("postgres"):
        url = str(request.getfixturevalue("postgres_server").url(f"reimport{uuid.uuid4().hex[:8]}"))
    else:
        url = f"sqlite:///{tmp_path / 'r.db'}"
    with memkit.open(url) as opened:
        yield opened


def test_two_users_import_the_same_file_each_into_their_own_namespace(
    mem: memkit.Memory, files: dict[str, Path]
) -> None:
    alice = import_otlp(mem, files["langgraph-openinference"], user_id="alice", agent_id="bot")
    bob = import_otlp(mem, files["langgraph-openinference"], user_id="bob", agent_id="bot")
    assert (bob.steps, bob.recalls) == (alice.steps, alice.recalls) and alice.recalls == 1
    mine, theirs = mem.recalls(user_id="bob", agent_id="bot"), mem.recalls(user_id="alice", agent_id="bot")
    assert len(mine) == len(theirs) == 1 and mine[0].id != theirs[0].id
    assert [h.content for h in mine[0].hits] == [h.content for h in theirs[0].hits]
    assert len(mem.get_all("bob", "bot", 100)) == len(mem.get_all("alice", "bot", 100)) == alice.steps


@pytest.mark.parametrize("name", ["langgraph-openinference", "openai-openinference"])
def test_a_reimport_is_refused_for_every_file(mem: memkit.Memory, files: dict[str, Path], name: str) -> None:
    first = import_otlp(mem, files[name], user_id="alice", agent_id="bot")
    with pytest.raises(memkit.InvalidInputError, match=r"is already imported into user 'alice'.*re-import is refused"):
        import_otlp(mem, files[name], user_id="alice", agent_id="bot")
    assert len(mem.get_all("alice", "bot", 100)) == first.steps
    assert len(mem.recalls(user_id="alice", agent_id="bot")) == first.recalls
    # Into another workflow it is another run, and is written.
    again = import_otlp(mem, files[name], user_id="alice", agent_id="bot", workflow_id="second-look")
    assert len(mem.get_all("alice", "bot", 100)) == first.steps + again.steps
