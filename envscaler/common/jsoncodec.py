"""The host's one JSON codec (gateway, sandbox client, session store): orjson, several times
faster than the standard library, with the standard library's behaviour wherever orjson refuses
what the standard library accepts.

The two differ only at the edges: lone surrogates (valid JSON escapes, which the in-sandbox
runtime sends as ``surrogatepass`` bytes) and nesting deeper than orjson's limit. There the
standard library answers, encoding exactly as the runtime does (`envscaler.sandbox.runtime.protocol.dumps`,
which cannot be imported from here without tying the gateway to the runtime's package), so no
message that was valid before is refused now. One difference is kept: orjson writes NaN as null
where the standard library (``allow_nan=False``) refuses it; nothing on the hot path holds NaN
(arguments and ``init_config`` are strict JSON, the runtime never sends it).
"""

from __future__ import annotations

import gc
import json
from typing import Any

import orjson

LARGE_TEXT = 1 << 16
_STANDARD = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dumps(value: Any) -> str:
    """Compact JSON text, non-ASCII kept as is (``json.dumps(separators=(",", ":"),
    ensure_ascii=False, allow_nan=False)``)."""
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        return _STANDARD.encode(value)


def dump_bytes(value: Any) -> bytes:
    """`dumps` as UTF-8 bytes, lone surrogates as ``surrogatepass`` bytes (as the runtime sends
    them)."""
    try:
        return orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return _STANDARD.encode(value).encode("utf-8", "surrogatepass")


def loads(text: str | bytes) -> Any:
    """Like ``json.loads`` (its exceptions too) for every input. A large text (a state, a
    snapshot) is parsed with the cycle collector paused: parsing makes no cycles, and the
    collections its hundreds of thousands of new objects would set off, each scanning the
    process's objects, cost up to five times the parse (3 MB: 8 ms paused, up to 48 ms not)."""
    if len(text) < LARGE_TEXT:
        return _loads(text)
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _loads(text)
    finally:
        if enabled:
            gc.enable()


def _loads(text: str | bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
