"""The JSON texts a trace record stores, encoded as ``json.dumps`` would encode them.

``json.dumps`` builds a new encoder on every call with options; these are built once. The same
options, so the same text: content sorted with json's default separators, metadata compact.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["CONTENT_JSON", "METADATA_JSON", "encode_metadata_once"]

CONTENT_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True)
METADATA_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))

# Where the metadata's encoding leaves a step's parameters and result, encoded apart: an escaped
# NUL, so no text of a step reads as a slot unless it is this very string (then all is encoded again).
_SLOTS = ("\x00memkit.parameters", "\x00memkit.result")
_SLOT_TEXTS = tuple(METADATA_JSON.encode(slot) for slot in _SLOTS)
# Below this, encoding the two objects again inside the metadata costs less than filling the slots.
_SLOT_MIN_CHARS = 400


def encode_metadata_once(meta: dict[str, Any], payload: dict[str, Any]) -> tuple[str, list[str]]:
    """``meta`` as ``METADATA_JSON`` encodes it, and its trace ``payload``'s parameters and result as
    that text holds them (``"null"`` unless a dict), each encoded once: the two objects first, then the
    rest with a slot in their place, which their text then fills (short objects are simply encoded
    again: filling slots costs more than that)."""
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
