"""Metadata a write keeps: checked and copied in one walk, as JSON reads it back, private to the store."""

from __future__ import annotations

import enum
import json
from types import MappingProxyType

import pytest

import memkit
from memkit import InvalidInputError
from memkit._core._validate import DEFAULT_LIMITS, encode_metadata


class Lab(enum.StrEnum):
    NORTH = "north"


class Count(enum.IntEnum):
    THREE = 3


def test_nested_metadata_is_kept_as_json_reads_it_back_and_not_shared_with_the_caller() -> None:
    inner = {"gene": "G05", "tags": ("a", "b"), "n": Count.THREE, "x": 1.5, "lab": Lab.NORTH}
    given = {"value": inner, "view": MappingProxyType({"k": [1, {"deep": None}]}), Lab.NORTH: True}
    kept, text = encode_metadata(given)
    assert kept == json.loads(text)
    assert [type(v) for v in (kept["value"]["lab"], kept["value"]["n"], kept["value"]["tags"], kept["view"])] == [
        str, int, list, dict]
    assert type(next(k for k in kept if k == "north")) is str
    inner["gene"] = "changed"
    given["view"]["k"][1]["deep"] = "changed"  # type: ignore[index]
    assert kept["value"]["gene"] == "G05" and kept["view"]["k"][1]["deep"] is None


@pytest.mark.parametrize(("metadata", "says"), [
    ({"a": {"b": float("nan")}}, "which JSON cannot hold"),
    ({"a": [2**63]}, "does not fit in 64 bits"),
    ({"a": {1: "x"}}, "keys must be strings"),
    ({"a": {"b": object()}}, "not JSON-serialisable"),
    ({"a": ["\ud800"]}, "lone surrogate"),
])
def test_bad_nested_metadata_is_refused_and_nothing_is_written(metadata: dict[str, object], says: str) -> None:
    with pytest.raises(InvalidInputError, match=says):
        encode_metadata(metadata)
    with memkit.open("memory://") as mem:
        with pytest.raises(InvalidInputError, match=says):
            mem.add("note", user_id="u", agent_id="a", metadata=metadata)
        assert mem.get_all(user_id="u", agent_id="a") == []


def test_a_scalar_below_the_depth_limit_is_refused_like_a_container() -> None:
    deepest = DEFAULT_LIMITS.max_metadata_depth
    nested: dict[str, object] = {"leaf": "x"}
    for _ in range(deepest - 1):
        nested = {"k": nested}
    with pytest.raises(InvalidInputError, match="nested deeper"):
        encode_metadata(nested)
    assert encode_metadata(nested["k"])[0] == nested["k"]  # type: ignore[index]
