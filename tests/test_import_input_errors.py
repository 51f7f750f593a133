"""A malformed import file is a clear memkit error naming the file and line, never a plain Python one, and
writes nothing: ``import_otlp`` and ``import_jsonl`` on JSON nested past Python's parser, bytes that are not
UTF-8, and an empty span file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import memkit
from memkit.otel import import_otlp

_DEEP = "[" * 100_000 + "]" * 100_000  # json.loads: RecursionError


@pytest.fixture(params=["sqlite", "memory"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[memkit.Memory]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'e.db'}"
    with memkit.open(url) as opened:
        opened.add("already here", "u", "a")
        yield opened


def _unchanged(mem: memkit.Memory) -> None:
    assert mem.stats().memories == 1 and mem.recalls() == []


@pytest.mark.parametrize(("text", "message"), [
    (_DEEP.encode(), r"deep\.json line 1 is JSON nested deeper than Python can read"),
    (b'{"resourceSpans": []}\n' + _DEEP.encode() + b"\n", r"deep\.json line 2 is JSON nested deeper"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "caf\xe9"', r"deep\.json line 1 is not UTF-8 text"),
    (b"\n{}\n\xff\n", r"deep\.json line 3 is not UTF-8 text \(byte 5\)"),
    (b"", r"deep\.json is empty"),
    (b"  \n\n", r"deep\.json is empty"),
    (b'{"resourceSpans": []}', "holds no span"),
])
def test_a_bad_span_file_is_a_clear_error(mem: memkit.Memory, tmp_path: Path, text: bytes, message: str) -> None:
    path = tmp_path / "deep.json"
    path.write_bytes(text)
    with pytest.raises(memkit.InvalidInputError, match=message):
        import_otlp(mem, path, user_id="u", agent_id="a")
    _unchanged(mem)


def test_a_span_dict_nested_past_the_stack_is_a_clear_error(mem: memkit.Memory) -> None:
    value: dict[str, object] = {"intValue": "1"}
    for _ in range(5_000):
        value = {"arrayValue": {"values": [value]}}
    request = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "1" * 32, "spanId": "2" * 16, "name": "s", "startTimeUnixNano": "1", "endTimeUnixNano": "2",
        "attributes": [{"key": "deep", "value": value}]}]}]}]}
    with pytest.raises(memkit.InvalidInputError, match="span 0: an attribute value is nested deeper"):
        import_otlp(mem, request, user_id="u", agent_id="a")
    _unchanged(mem)


@pytest.mark.parametrize(("text", "message"), [
    (b'{"user_id": "u", "agent_id": "a", "content": "ok"}\n' + _DEEP.encode() + b"\n",
     r"rows\.jsonl:2 is JSON nested deeper than Python can read"),
    (b'{"user_id": "u", "agent_id": "a", "content": "ok"}\n{"user_id": "u", "agent_id": "a", "content": "\xff"}\n',
     r"rows\.jsonl:2 is not UTF-8 text"),
])
def test_a_bad_jsonl_file_is_a_clear_error(mem: memkit.Memory, tmp_path: Path, text: bytes, message: str) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(text)
    with pytest.raises(memkit.InvalidInputError, match=message):
        memkit.import_jsonl(mem, path)
    _unchanged(mem)
