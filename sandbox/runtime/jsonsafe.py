"""Turn whatever environment code returns or holds into plain JSON values, deterministically.

Tool results and state leave the sandbox as JSON, and two sandboxes fed the same calls must send
the same bytes. The conversion therefore never fails and never depends on memory addresses:

- ``dict`` and other mappings -> dict; a key that is not a ``str`` becomes the JSON text of its
  converted value (``1`` -> ``"1"``, ``None`` -> ``"null"``, ``(1, 2)`` -> ``"[1,2]"``)
- ``list``, ``tuple`` (named tuples too), ``deque`` -> list
- ``set``, ``frozenset`` -> list sorted by the JSON text of the converted items
- ``datetime``, ``date``, ``time`` -> ``isoformat()``; ``UUID`` -> its canonical string
- ``float`` NaN and infinities -> ``null``, as JavaScript's ``JSON.stringify`` does: JSON has no
  such numbers and every client parses ``null``
- ``Decimal`` -> ``float`` when the float's shortest repr equals it (``Decimal("10.10")`` -> 10.1),
  else its string (no silent rounding); NaN/inf -> ``null``
- ``Enum`` -> its converted ``value``; dataclass instance -> dict of its fields
- ``bytes``, ``bytearray`` -> UTF-8 text with U+FFFD for invalid bytes
- ``str`` -> itself, with lone surrogates (unencodable in UTF-8) replaced by U+FFFD
- an ``int`` too long for ``str()`` (``sys.get_int_max_str_digits``) -> ``"<int of N bits>"``
- anything else -> ``repr`` with ``" at 0x..."`` addresses removed
- a container met again inside itself -> ``"<cycle: TYPE>"``; nesting deeper than ``MAX_DEPTH``
  -> ``"<max depth reached: TYPE>"``
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import deque
from collections.abc import Mapping
from datetime import date, time
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID

from sandbox.runtime.protocol import dumps

MAX_DEPTH = 100
_SHORT_INT_BITS = 2000  # below the smallest allowed int_max_str_digits (640 digits, ~2126 bits)
_SURROGATES = re.compile("[\ud800-\udfff]")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_SCALARS = (type(None), bool, int, float, str)


def to_json_safe(value: Any) -> Any:
    """A value made of dict/list/str/int/float/bool/None only, built from ``value``."""
    return _convert(value, 0, set())


def _convert(value: Any, depth: int, active: set[int]) -> Any:
    if type(value) in _SCALARS:
        return _scalar(value)
    if isinstance(value, Enum):
        value = value.value
        if type(value) in _SCALARS:
            return _scalar(value)
    container = isinstance(value, (Mapping, list, tuple, deque, set, frozenset)) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type))
    if not container:
        return _leaf(value)
    if id(value) in active:
        return f"<cycle: {type(value).__name__}>"
    if depth >= MAX_DEPTH:
        return f"<max depth reached: {type(value).__name__}>"
    active.add(id(value))
    try:
        return _container(value, depth + 1, active)
    except Exception:  # noqa: BLE001 - a user-defined mapping whose items() raises
        return _repr(value)
    finally:
        active.discard(id(value))


def _container(value: Any, depth: int, active: set[int]) -> Any:
    if isinstance(value, Mapping):
        return {_key(key, depth, active): _convert(item, depth, active)
                for key, item in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((_convert(item, depth, active) for item in value), key=dumps)
    if isinstance(value, (list, tuple, deque)):
        return [_convert(item, depth, active) for item in value]
    return {field.name: _convert(getattr(value, field.name, None), depth, active)
            for field in dataclasses.fields(value)}


def _key(key: Any, depth: int, active: set[int]) -> str:
    converted = _convert(key, depth, active)
    return converted if isinstance(converted, str) else dumps(converted)


def _scalar(value: Any) -> Any:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return _int(value)
    return value


def _leaf(value: Any) -> Any:
    """Values that are not containers: subclasses of scalars, well-known types, then ``repr``.

    Subclasses of scalars go through the base type's own slot, so an overridden ``__int__`` or
    ``__str__`` in environment code cannot change the value that is sent."""
    if isinstance(value, int):
        return _scalar(int.__index__(value))
    if isinstance(value, float):
        return _scalar(float.__float__(value))
    if isinstance(value, str):
        return _text(str.__str__(value))
    if isinstance(value, (date, time)):  # datetime is a date
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, Decimal):
        return _decimal(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return _repr(value)


def _decimal(value: Decimal) -> float | str | None:
    if not value.is_finite():
        return None
    as_float = float(value)
    return as_float if Decimal(repr(as_float)) == value else str(value)


def _int(value: int) -> int | str:
    if value.bit_length() < _SHORT_INT_BITS:
        return value
    try:
        str(value)
    except ValueError:
        return f"<int of {value.bit_length()} bits>"
    return value


def _text(value: str) -> str:
    return value if value.isascii() else _SURROGATES.sub("\ufffd", value)


def _repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001 - a broken __repr__ must not break the reply
        return f"<unrepresentable {type(value).__name__}: {type(exc).__name__}>"
    return _text(_ADDRESS.sub("", text))
