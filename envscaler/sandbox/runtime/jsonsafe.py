"""Turn whatever environment code returns or holds into plain JSON values, deterministically.

Tool results and state leave the sandbox as JSON, and two sandboxes fed the same calls must send
the same bytes; check functions read the state as that JSON, so an object in the state must arrive
as data they can walk, not as text:

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
- a number of a package (a ``numbers.Real`` from outside the standard library, e.g. mpmath's
  ``mpf``) -> its ``float`` value
- an instance of a class defined outside the standard library (environment code, a package it
  imports) that has a ``__dict__`` or ``__slots__`` -> dict of its public attributes (names not
  starting with ``_``): slots in class order, then the instance ``__dict__`` in insertion order;
  when the class defines ``__getstate__`` (the pickle protocol's "this is my state"), what it
  returns, converted (so a class can leave out a link back to its parent or a cache)
- ``bytes``, ``bytearray`` -> UTF-8 text with U+FFFD for invalid bytes
- ``str`` -> itself, with lone surrogates (unencodable in UTF-8) replaced by U+FFFD
- an ``int`` too long for ``str()`` (``sys.get_int_max_str_digits``) -> ``"<int of N bits>"``
- anything else (classes, functions, exceptions, standard-library objects) -> ``repr`` with
  ``" at 0x..."`` addresses removed
- nesting deeper than ``MAX_DEPTH`` -> ``"<max depth reached: TYPE>"``

Two things have no faithful JSON form and raise ``NotData`` naming where they are (``at
state.root.contents["a"].parent``), rather than send something a check would misread: a value met
again inside itself (a cycle, e.g. a child pointing back at its parent; a value shared by two
branches is no cycle and appears in both), and two keys of one mapping that become the same text.

Each type is classified once (``_handler``), so the per-value cost is a dict lookup and a call.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
import sys
from collections import deque
from collections.abc import Callable, Mapping
from datetime import date, time
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID

from envscaler.sandbox.runtime.protocol import dumps

MAX_DEPTH = 100
_SHORT_INT_BITS = 2000  # below the smallest allowed int_max_str_digits (640 digits, ~2126 bits)
_MAX_CACHED_TYPES = 4096  # environment classes are new objects after every reset
_SURROGATES = re.compile("[\ud800-\udfff]")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STANDARD = frozenset(sys.stdlib_module_names) | {"builtins"}
_LEAVES = (int, float, str, date, time, UUID, Decimal, bytes, bytearray)
_PLAIN_SCALARS = frozenset({str, int, float, bool, type(None)})
_DEFAULT_GETSTATE = getattr(object, "__getstate__", None)
_Handler = Callable[[Any, int, set[int]], Any]


class NotData(ValueError):
    """A value with no faithful JSON form; ``path`` locates it from the converted root."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.root = "value"
        self.path: list[str | int] = []

    def __str__(self) -> str:
        where = "".join(_step(part) for part in self.path)
        return f"{self.reason} (at {self.root}{where})"


def to_json_safe(value: Any, root: str = "value") -> Any:
    """A value made of dict/list/str/int/float/bool/None only, built from ``value``.

    Raises ``NotData`` (its message naming the place from ``root``) for a cycle or colliding keys.
    """
    try:
        return _convert(value, 0, set())
    except NotData as exc:
        exc.root = root
        raise


def to_json_text(value: Any, root: str = "value") -> str:
    """``dumps(to_json_safe(value, root))``, at the JSON encoder's speed when ``value`` is plain
    data already (a database as parsed: dicts with text keys, lists, text, numbers, booleans,
    null, nested at most ``MAX_DEPTH``), which is then its own conversion; a NaN, an integer too
    long for text, a lone surrogate or a cycle there sends it the walker's way. A state of
    megabytes is written in a third of the walker's time."""
    if _plain(value):
        try:
            text = dumps(value)
        except (ValueError, RecursionError):  # NaN or infinity, an integer too long for text
            pass
        else:
            if text.isascii() or not _SURROGATES.search(text):
                return text
    return dumps(to_json_safe(value, root))


def _plain(root: Any) -> bool:
    """Whether ``root`` holds nothing but exact dicts with text keys, lists and JSON scalars,
    nested at most ``MAX_DEPTH`` (so a cycle is not plain either)."""
    if type(root) is not dict and type(root) is not list:
        return type(root) in _PLAIN_SCALARS
    stack = [(root, 0)]
    while stack:
        value, depth = stack.pop()
        if depth >= MAX_DEPTH:
            return False
        if type(value) is dict:
            if not all(type(key) is str for key in value):
                return False
            value = value.values()
        for item in value:
            kind = type(item)
            if kind is dict or kind is list:
                stack.append((item, depth + 1))
            elif kind not in _PLAIN_SCALARS:
                return False
    return True


def _convert(value: Any, depth: int, active: set[int]) -> Any:
    return (_HANDLERS.get(type(value)) or _handler(type(value)))(value, depth, active)


def _handler(kind: type) -> _Handler:
    """How values of ``kind`` convert, decided once per type."""
    if len(_HANDLERS) >= _MAX_CACHED_TYPES:
        _reset_cache()
    handler = _classify(kind)
    _HANDLERS[kind] = handler
    return handler


def _classify(kind: type) -> _Handler:
    if issubclass(kind, Enum):
        return _enum
    if issubclass(kind, Mapping):
        return _nested(_mapping)
    if issubclass(kind, (list, tuple, deque)):
        return _nested(_sequence)
    if issubclass(kind, (set, frozenset)):
        return _nested(_set)
    if dataclasses.is_dataclass(kind):
        return _nested(_dataclass)
    if issubclass(kind, _LEAVES):
        return _leaf
    if issubclass(kind, numbers.Real) and kind.__module__.partition(".")[0] not in _STANDARD:
        return _real  # a package's number (mpmath's mpf): its value, not its internals
    if _is_plain_object(kind):
        if getattr(kind, "__getstate__", _DEFAULT_GETSTATE) is not _DEFAULT_GETSTATE:
            return _nested(_declared_state)
        return _nested(_object(kind))
    return lambda value, depth, active: _repr(value)


def _real(value: Any, depth: int, active: set[int]) -> float | str | None:
    try:
        return _float(float(value), depth, active)
    except (TypeError, ValueError, OverflowError):
        return _repr(value)


def _is_plain_object(kind: type) -> bool:
    """Instances whose attributes are their data: classes from outside the standard library,
    not classes themselves, not exceptions, with somewhere to hold attributes."""
    if issubclass(kind, (type, BaseException)):
        return False
    if kind.__module__.partition(".")[0] in _STANDARD:
        return False
    return kind.__dictoffset__ != 0 or bool(_slots(kind))


def _nested(walk: Callable[[Any, int, set[int]], Any]) -> _Handler:
    """``walk`` guarded against cycles and unbounded depth."""

    def convert(value: Any, depth: int, active: set[int]) -> Any:
        identity = id(value)
        if identity in active:
            raise NotData(f"a cycle: this {type(value).__name__} contains itself")
        if depth >= MAX_DEPTH:
            return f"<max depth reached: {type(value).__name__}>"
        active.add(identity)
        try:
            return walk(value, depth + 1, active)
        except NotData:
            raise
        except Exception:  # noqa: BLE001 - environment code raised (a mapping's items(), ...)
            return _repr(value)
        finally:
            active.discard(identity)

    return convert


def _mapping(value: Mapping[Any, Any], depth: int, active: set[int]) -> dict[str, Any]:
    items = list(value.items())
    converted: dict[str, Any] = {}
    for key, item in items:
        text = key if type(key) is str and key.isascii() else _key(key, depth, active)
        if text in converted:
            raise _collision(items, text, key, depth, active)
        try:
            converted[text] = (_HANDLERS.get(type(item)) or _handler(type(item)))(
                item, depth, active)
        except NotData as exc:
            exc.path.insert(0, text)
            raise
    return converted


def _collision(items: list[tuple[Any, Any]], text: str, key: Any, depth: int,
               active: set[int]) -> NotData:
    first = next(other for other, _ in items if _key(other, depth, active) == text)
    return NotData(f"the keys {_repr(first)} and {_repr(key)} are both {text!r} as text")


def _sequence(value: Any, depth: int, active: set[int]) -> list[Any]:
    converted = []
    for index, item in enumerate(value):
        try:
            converted.append((_HANDLERS.get(type(item)) or _handler(type(item)))(
                item, depth, active))
        except NotData as exc:
            exc.path.insert(0, index)
            raise
    return converted


def _set(value: Any, depth: int, active: set[int]) -> list[Any]:
    return sorted(_sequence(value, depth, active), key=dumps)


def _dataclass(value: Any, depth: int, active: set[int]) -> dict[str, Any]:
    return _fields([(field.name, getattr(value, field.name, None))
                    for field in dataclasses.fields(value)], depth, active)


def _object(kind: type) -> Callable[[Any, int, set[int]], Any]:
    """The walk of instances of ``kind``: its public slots, known once, then its ``__dict__``."""
    slots = [name for name in _slots(kind) if not name.startswith("_")]
    has_dict = kind.__dictoffset__ != 0

    def walk(value: Any, depth: int, active: set[int]) -> dict[str, Any]:
        pairs = []
        for name in slots:
            try:
                pairs.append((name, object.__getattribute__(value, name)))
            except AttributeError:  # an unset slot
                continue
        if has_dict:
            pairs += [(name, item) for name, item
                      in object.__getattribute__(value, "__dict__").items()
                      if type(name) is str and not name.startswith("_")]
        return _fields(pairs, depth, active)

    return walk


def _declared_state(value: Any, depth: int, active: set[int]) -> Any:
    try:
        state = value.__getstate__()
    except Exception as exc:  # noqa: BLE001 - environment code raises anything
        raise NotData(f"{type(value).__name__}.__getstate__ raised {type(exc).__name__}: "
                      f"{exc}") from None
    return _convert(state, depth, active)


def _fields(pairs: list[tuple[str, Any]], depth: int, active: set[int]) -> dict[str, Any]:
    converted: dict[str, Any] = {}
    for name, item in pairs:
        try:
            converted[name] = (_HANDLERS.get(type(item)) or _handler(type(item)))(
                item, depth, active)
        except NotData as exc:
            exc.path.insert(0, name)
            raise
    return converted


def _slots(kind: type) -> list[str]:
    names: list[str] = []
    for klass in reversed(kind.__mro__):
        slots = vars(klass).get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and name not in names:
                names.append(name)
    return names


def _key(key: Any, depth: int, active: set[int]) -> str:
    converted = _convert(key, depth, active)
    return converted if isinstance(converted, str) else dumps(converted)


def _enum(value: Enum, depth: int, active: set[int]) -> Any:
    return _convert(value.value, depth, active)


def _str(value: str, depth: int, active: set[int]) -> str:
    return _text(value)


def _float(value: float, depth: int, active: set[int]) -> float | None:
    return value if math.isfinite(value) else None


def _exact(value: Any, depth: int, active: set[int]) -> Any:
    return value


def _int(value: int, depth: int = 0, active: set[int] | None = None) -> int | str:
    if value.bit_length() < _SHORT_INT_BITS:
        return value
    try:
        str(value)
    except ValueError:
        return f"<int of {value.bit_length()} bits>"
    return value


def _leaf(value: Any, depth: int, active: set[int]) -> Any:
    """Subclasses of scalars and well-known types. Subclasses of scalars go through the base
    type's own slot, so an overridden ``__int__`` or ``__str__`` in environment code cannot change
    the value that is sent."""
    if isinstance(value, int):
        return _int(int.__index__(value))
    if isinstance(value, float):
        return _float(float.__float__(value), depth, active)
    if isinstance(value, str):
        return _text(str.__str__(value))
    if isinstance(value, (date, time)):  # datetime is a date
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, Decimal):
        return _decimal(value)
    return bytes(value).decode("utf-8", "replace")


def _decimal(value: Decimal) -> float | str | None:
    if not value.is_finite():
        return None
    as_float = float(value)
    return as_float if Decimal(repr(as_float)) == value else str(value)


def _text(value: str) -> str:
    return value if value.isascii() else _SURROGATES.sub("\ufffd", value)


def _repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001 - a broken __repr__ must not break the reply
        return f"<unrepresentable {type(value).__name__}: {type(exc).__name__}>"
    return _text(_ADDRESS.sub("", text))


def _step(part: str | int) -> str:
    if isinstance(part, int):
        return f"[{part}]"
    return f".{part}" if _IDENTIFIER.match(part) else f"[{dumps(part)}]"


_BASE_HANDLERS: dict[type, _Handler] = {
    type(None): _exact, bool: _exact, int: _int, float: _float, str: _str,
    dict: _nested(_mapping), list: _nested(_sequence), tuple: _nested(_sequence),
}
_HANDLERS: dict[type, _Handler] = {}


def _reset_cache() -> None:
    _HANDLERS.clear()
    _HANDLERS.update(_BASE_HANDLERS)


_reset_cache()
