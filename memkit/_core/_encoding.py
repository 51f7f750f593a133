"""The JSON texts a trace record stores: content sorted with json's default separators, metadata
compact; the encoders are made once (``json.dumps`` builds one on every call with options)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["CONTENT_JSON", "METADATA_JSON", "content_text", "encode_metadata_once"]

CONTENT_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True)
METADATA_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def content_text(payload: dict[str, Any]) -> str:
    """``CONTENT_JSON.encode(payload)``."""
    return CONTENT_JSON.encode(payload)


def encode_metadata_once(meta: dict[str, Any], payload: dict[str, Any]) -> tuple[str, list[str]]:
    """``meta`` as ``METADATA_JSON`` encodes it, and its trace ``payload``'s parameters and result as
    that text holds them (``"null"`` unless a dict)."""
    objects = [METADATA_JSON.encode(value) if type(value) is dict else "null"
               for value in (payload.get("parameters"), payload.get("result"))]
    return METADATA_JSON.encode(meta), objects
