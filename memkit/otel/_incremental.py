"""A span file's spans decoded as they are reached, for the second process of a streamed import.

``json.loads`` of a whole file (about 0.5 s for 100,000 spans) comes before the first span can be
planned, and the importing process has nothing to do meanwhile. Here a request's outer objects
are read key by key and each span is decoded on its own (by ``json``'s own decoder, so each value is
what ``json.loads`` gives), ``_BATCH`` spans at a time, as :func:`~memkit.otel._convert._walk` would
give them. Only the plain layout is read so: a strictly valid JSON object whose blocks name their
``resource`` before their ``scopeSpans``, no key twice, one request or JSON lines. Anything else
raises :class:`Odd`; before the first span is given that means the ordinary reading, after it the
import in one process, which says what is wrong with the file if anything is (nothing is
committed before the whole file was read).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from memkit.otel._convert import _read_attributes, _walk
from memkit.otel._spans import _load

__all__ = ["Odd", "requests"]

_BATCH = 256  # spans given at a time
_SPACE = re.compile(r"[ \t\n\r]*")  # what json.loads skips between tokens
_DECODE = json.JSONDecoder().raw_decode

Blocks = Iterable[tuple[list[Any], dict[str, Any]]]


class Odd(Exception):
    """Not the plain layout this module reads piece by piece."""


def requests(path: str) -> Iterator[Blocks]:
    """The requests of the file at ``path`` (as :func:`~memkit.otel._spans._load` reads them), each as
    its ``(raw spans, resource attributes)`` blocks."""
    text = Path(path).read_text(encoding="utf-8")
    reader = _Reader(text)
    try:
        first = reader.first()
    except Odd:
        for request in _load(path):
            yield _walk(request)
        return
    yield first
    if not reader.finished:
        raise Odd("the first request was not read to its end")
    rest = _SPACE.match(text, reader.end)
    assert rest is not None
    if rest.end() == len(text):
        return
    # More after the first object: JSON lines, read as _load reads them, the first being that object.
    lines = text.splitlines()
    first_line = next(i for i, line in enumerate(lines) if line.strip())
    if lines[first_line].strip(" \t\n\r") != text[reader.start:reader.end]:
        raise Odd("not JSON lines")
    for line in lines[first_line + 1:]:
        if line.strip():
            yield _walk(json.loads(line))


class _Reader:
    """The first JSON object of ``text`` read as a request, its spans decoded one by one."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.start = self.end = 0
        self.finished = False  # the first request read to its end

    def _space(self) -> None:
        match = _SPACE.match(self.text, self.pos)
        assert match is not None
        self.pos = match.end()

    def _char(self, expected: str) -> None:
        self._space()
        if self.text[self.pos:self.pos + 1] != expected:
            raise Odd(f"{expected!r} expected at {self.pos}")
        self.pos += 1

    def _value(self) -> Any:
        self._space()
        try:
            value, self.pos = _DECODE(self.text, self.pos)
        except ValueError:
            raise Odd(f"not JSON at {self.pos}") from None
        return value

    def _keys(self) -> Iterator[str]:
        """The keys of the object starting here, each read with its value by the loop's body."""
        self._char("{")
        self._space()
        if self.text[self.pos:self.pos + 1] == "}":
            self.pos += 1
            return
        seen: set[str] = set()
        while True:
            self._space()
            if self.text[self.pos:self.pos + 1] != '"':
                raise Odd(f"a key expected at {self.pos}")
            key = self._value()
            if key in seen:
                raise Odd(f"key {key!r} twice")  # json.loads keeps the last one: read it whole
            seen.add(key)
            self._char(":")
            yield key
            self._space()
            if self.text[self.pos:self.pos + 1] == ",":
                self.pos += 1
                continue
            self._char("}")
            return

    def _items(self) -> Iterator[None]:
        """The items of the array starting here, each read by the loop's body."""
        self._char("[")
        self._space()
        if self.text[self.pos:self.pos + 1] == "]":
            self.pos += 1
            return
        while True:
            yield None
            self._space()
            if self.text[self.pos:self.pos + 1] == ",":
                self.pos += 1
                continue
            self._char("]")
            return

    def first(self) -> Blocks:
        """The first request's blocks, its first span already decoded (Odd before that: read it whole)."""
        self._space()
        self.start = self.pos
        blocks = self._request()
        try:
            head = next(blocks)
        except StopIteration:
            return []

        def all_blocks() -> Blocks:
            yield head
            yield from blocks

        return all_blocks()

    def _request(self) -> Iterator[tuple[list[Any], dict[str, Any]]]:
        found = False
        for key in self._keys():
            if key != "resourceSpans":
                self._value()
                continue
            found = True
            self._space()
            if self.text[self.pos:self.pos + 1] != "[":
                raise Odd("resourceSpans is not a list")
            for r, _ in enumerate(self._items()):
                yield from self._block(r)
        self.end = self.pos
        if not found:
            raise Odd("no resourceSpans")
        self.finished = True

    def _block(self, r: int) -> Iterator[tuple[list[Any], dict[str, Any]]]:
        resource: dict[str, Any] | None = None
        self._space()
        if self.text[self.pos:self.pos + 1] != "{":
            raise Odd("a block is not an object")
        for key in self._keys():
            if key == "resource":
                raw = self._value()
                resource = _read_attributes((raw or {}).get("attributes"), f"resourceSpans[{r}].resource")
            elif key == "scopeSpans" and resource is not None:
                self._space()
                if self.text[self.pos:self.pos + 1] != "[":
                    raise Odd("scopeSpans is not a list")
                for _ in self._items():
                    yield from self._scope(resource)
            elif key in ("scopeSpans", "instrumentationLibrarySpans"):
                raise Odd(f"{key} before the resource, or the older name")
            else:
                self._value()

    def _spans(self, resource: dict[str, Any]) -> Iterator[tuple[list[Any], dict[str, Any]]]:
        """_items and _value, inlined: this loop runs once a span."""
        text, space = self.text, _SPACE.match
        pos = space(text, self.pos + 1).end()  # type: ignore[union-attr]
        batch: list[Any] = []
        if text[pos:pos + 1] == "]":
            self.pos = pos + 1
            return
        while True:
            try:
                span, pos = _DECODE(text, pos)
            except ValueError:
                raise Odd(f"not JSON at {pos}") from None
            batch.append(span)
            pos = space(text, pos).end()  # type: ignore[union-attr]
            following = text[pos:pos + 1]
            if following == ",":
                pos = space(text, pos + 1).end()  # type: ignore[union-attr]
                if len(batch) >= _BATCH:
                    self.pos = pos
                    yield batch, resource
                    batch = []
                continue
            if following != "]":
                raise Odd(f"',' or ']' expected at {pos}")
            self.pos = pos + 1
            yield batch, resource
            return

    def _scope(self, resource: dict[str, Any]) -> Iterator[tuple[list[Any], dict[str, Any]]]:
        self._space()
        if self.text[self.pos:self.pos + 1] != "{":
            raise Odd("a scope is not an object")
        for key in self._keys():
            if key != "spans":
                self._value()
                continue
            self._space()
            if self.text[self.pos:self.pos + 1] != "[":
                raise Odd("spans is not a list")
            yield from self._spans(resource)
