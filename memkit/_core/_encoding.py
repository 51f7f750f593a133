"""The JSON texts a trace record stores, encoded as ``json.dumps`` would encode them.

``json.dumps`` builds a new encoder on every call with options; these are built once. The same
options, so the same text: content sorted with json's default separators, metadata compact.
Metadata that a caller has walked and vouches for (:func:`encode_metadata_once`'s ``plain``) is
encoded by pydantic-core instead, some twice as fast, which gives the same text for such values.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["CONTENT_JSON", "METADATA_JSON", "TINY_FLOAT", "content_text", "encode_metadata_once"]

CONTENT_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True)
# CONTENT_JSON's own C encoder, made once, without the dict of entered containers that catches a
# cycle: ``encode`` makes both anew for every call, about a quarter of the time of a step's content.
_make_c_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_content_chunks: Any = None if _make_c_encoder is None else _make_c_encoder(
    None, CONTENT_JSON.default, json.encoder.encode_basestring, None, ": ", ", ", True, False, True)
METADATA_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))

# Where the metadata's encoding leaves a step's parameters and result, encoded apart: an escaped
# NUL, so no text of a step reads as a slot unless it is this very string (then all is encoded again).
_SLOTS = ("\x00memkit.parameters", "\x00memkit.result")
_SLOT_TEXTS = tuple(METADATA_JSON.encode(slot) for slot in _SLOTS)
# Below this, encoding the two objects again inside the metadata costs less than filling the slots.
_SLOT_MIN_CHARS = 400

# pydantic-core writes a float as repr() does except below this magnitude (0.000064 for 6.4e-05).
TINY_FLOAT = 1e-4
# A step's timing in the payload, often a tiny duration, goes through a slot like the objects above.
_TIMING = ("timestamp", "duration")
_TIMING_SLOTS = tuple(f"\x00memkit.{key}" for key in _TIMING)
_TIMING_SLOT_TEXTS = tuple(METADATA_JSON.encode(slot) for slot in _TIMING_SLOTS)
_fast: Any = None  # pydantic_core.to_json once it has shown it writes what json writes; False if not


def content_text(payload: dict[str, Any]) -> str:
    """``CONTENT_JSON.encode(payload)`` of a payload that holds no cycle (a tree of fresh containers, as
    :func:`~memkit._core._records.trace_row` copies it): a cycle would end in a RecursionError."""
    if _content_chunks is None:  # a Python without json's C accelerator
        return CONTENT_JSON.encode(payload)
    return "".join(_content_chunks(payload, 0))


def _fast_encoder() -> Any:
    """pydantic-core's encoder if it writes these samples as ``METADATA_JSON`` does (another version
    of it might not; json is then used), else False. Imported on first use: one-shot commands never
    encode a trace."""
    global _fast
    if _fast is None:
        try:
            from pydantic_core import to_json

            sample = {"s": "\x00\x1f\x7f\"\\\n\t\u2028é🧬</", "f": [0.1, -0.0, 1e16, 1.5e300, 1e-4,
                      1795693267.9734688, 9999999999999998.0, 123.0], "i": [0, -(2**63), 2**63 - 1, True, None],
                      "": {"k": [], "e": {}}}
            _fast = to_json if to_json(sample).decode() == METADATA_JSON.encode(sample) else False
        except Exception:  # no pydantic-core, or one that refuses: json does it all
            _fast = False
    return _fast


def _encode_plain(meta: dict[str, Any], payload: dict[str, Any]) -> tuple[str, list[str]] | None:
    to_json = _fast_encoder()
    if not to_json:
        return None
    timing: list[tuple[int, str, float]] = []
    for n, key in enumerate(_TIMING):
        value = payload.get(key)
        if type(value) is float and value != 0.0 and -TINY_FLOAT < value < TINY_FLOAT:
            timing.append((n, key, value))
            payload[key] = _TIMING_SLOTS[n]
    try:
        encoded = to_json(meta).decode()
    except Exception:  # anything pydantic-core will not take: json says what
        return None
    finally:
        for _, key, value in timing:
            payload[key] = value
    for n, _, value in timing:
        slot = _TIMING_SLOT_TEXTS[n]
        if encoded.count(slot) != 1:  # a step's own text is this very slot
            return None
        encoded = encoded.replace(slot, float.__repr__(value))
    objects = ["null", "null"]
    for n, key in enumerate(("parameters", "result")):
        value = payload.get(key)
        if type(value) is dict:
            objects[n] = to_json(value).decode()
    return encoded, objects


def encode_metadata_once(
    meta: dict[str, Any], payload: dict[str, Any], plain: bool = False
) -> tuple[str, list[str]]:
    """``meta`` as ``METADATA_JSON`` encodes it, and its trace ``payload``'s parameters and result as
    that text holds them (``"null"`` unless a dict), each encoded once: the two objects first, then the
    rest with a slot in their place, which their text then fills (short objects are simply encoded
    again: filling slots costs more than that).

    ``plain``: the caller vouches that ``meta`` is a tree of exact dicts with str keys, lists, str
    (valid Unicode), 64-bit ints, bools, None and finite floats, none of magnitude below
    :data:`TINY_FLOAT` but the payload's own ``timestamp`` and ``duration``; pydantic-core then
    encodes it (those two go through slots)."""
    if plain:
        done = _encode_plain(meta, payload)
        if done is not None:
            return done
    objects = ["null", "null"]
    kept: list[tuple[str, Any]] = []
    for n, key in enumerate(("parameters", "result")):
        value = payload.get(key)
        if type(value) is dict:
            objects[n] = METADATA_JSON.encode(value)
            kept.append((key, value))
            payload[key] = _SLOTS[n]
    if not kept or len(objects[0]) + len(objects[1]) < _SLOT_MIN_CHARS:
        for key, value in kept:
            payload[key] = value
        return METADATA_JSON.encode(meta), objects
    try:
        encoded = METADATA_JSON.encode(meta)
    finally:
        for key, value in kept:
            payload[key] = value
    for key, _ in kept:
        n = 0 if key == "parameters" else 1
        slot = _SLOT_TEXTS[n]
        if encoded.count(slot) != 1:  # a step's own text is this very slot: encode it all
            return METADATA_JSON.encode(meta), objects
        encoded = encoded.replace(slot, objects[n])
    return encoded, objects
