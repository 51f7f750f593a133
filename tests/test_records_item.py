"""Items made from stored records without running MemoryItem's validator are what validation made."""

from __future__ import annotations

from pathlib import Path

import pytest

import memkit
from memkit._core._models import MemoryItem
from memkit._core._records import Record


def _validated(item: MemoryItem) -> MemoryItem:
    return MemoryItem(**{name: getattr(item, name) for name in item.model_fields_set})


def test_to_item_equals_the_validated_item() -> None:
    record = Record("m1", "alice", "bio", "TP53", {"tags": ["a"], "nested": {"k": 1}}, 1_790_000_000_123_456)
    for score, details in ((None, None), (1, {"keyword": {"rank": 1}}), (0.25, {})):
        item = record.to_item(score, details)
        validated = MemoryItem(id="m1", content="TP53", score=score, metadata=record.metadata,
                               created_at=record.created_at, agent_id="bio", user_id="alice", score_details=details)
        assert item == validated
        assert item.model_fields_set == validated.model_fields_set
        assert item.model_dump_json() == validated.model_dump_json()
        assert type(item.score) is type(validated.score)  # an int score is a float, as validated
        assert item.metadata is not record.metadata  # validation copies the dict: so does to_item
        assert details is None or item.score_details is not details


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_store_hits_and_reads_equal_validated_items(url: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}?embedder=none" if url == "sqlite" else url
    with memkit.open(url) as mem:
        mem.add("TP53 knockdown raises apoptosis", "alice", "bio", metadata={"source": "paper", "n": 1})
        mem.add("BRCA1 repair", "alice", "bio")
        mem.add("TP53 in bob's namespace", "bob", "bio")
        hits = mem.search("TP53", "alice", "bio", limit=5, mode="keyword")
        assert [h.user_id for h in hits] == ["alice"]
        listed = mem.get_all("alice", "bio")
        for item in (*hits, *listed):
            validated = _validated(item)
            assert item == validated and item.model_dump_json() == validated.model_dump_json()
        hits[0].metadata["source"] = "changed by the caller"
        [again] = mem.search("TP53", "alice", "bio", limit=5, mode="keyword")
        assert again.metadata == {"source": "paper", "n": 1}
