"""The per-namespace indexes a process keeps for a store, within one memory budget.

Free of numpy on purpose: a store imports it when it opens, and the command line opens stores
without ever searching.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sized
from typing import Generic, TypeVar

__all__ = ["IndexCache"]


K = TypeVar("K", bound=Hashable)
X = TypeVar("X", bound=Sized)


class IndexCache(Generic[K, X]):
    """The per-namespace search indexes a process keeps for a store that can rebuild them (SQLite's
    keyword indexes, a graph store's namespace caches): the least recently used is dropped first
    once together they index more than ``max_indexed`` memories (``len`` of each); the index just
    stored or read always stays. Not thread-safe: the store serialises access.
    """

    def __init__(self, max_indexed: int) -> None:
        self.max_indexed = max_indexed
        self._indexes: OrderedDict[K, X] = OrderedDict()

    def __len__(self) -> int:
        return len(self._indexes)

    def __iter__(self) -> Iterator[K]:
        return iter(self._indexes)

    def get(self, key: K) -> X | None:
        """The namespace's index (now the most recently used), or ``None``."""
        index = self._indexes.get(key)
        if index is not None:
            self._indexes.move_to_end(key)
        return index

    def peek(self, key: K) -> X | None:
        """The namespace's index without counting it as used (a write folding into it)."""
        return self._indexes.get(key)

    def put(self, key: K, index: X) -> None:
        """Keep ``index`` for ``key``, then drop the least recently used past the budget."""
        self._indexes[key] = index
        self._indexes.move_to_end(key)
        while len(self._indexes) > 1 and sum(len(i) for i in self._indexes.values()) > self.max_indexed:
            self._indexes.popitem(last=False)

    def pop(self, key: K) -> X | None:
        return self._indexes.pop(key, None)

    def clear(self) -> None:
        self._indexes.clear()
