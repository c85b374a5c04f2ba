"""JSON-safe conversion: every value becomes plain JSON the same way every time; objects become
trees of their public attributes; cycles and colliding keys are errors that say where."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import numbers
import threading
import uuid
from collections import OrderedDict, deque, namedtuple
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import pytest

from envscaler.sandbox.runtime.jsonsafe import MAX_DEPTH, NotData, dumps, to_json_safe, to_json_text


class Color(enum.Enum):
    RED = "red"
    NESTED = ("a", 1)


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Point:
    x: int
    tags: set[str]


class BrokenRepr(Exception):
    def __repr__(self) -> str:
        raise RuntimeError("no")


class SneakyStr(str):
    def __str__(self) -> str:
        return "changed"


Pair = namedtuple("Pair", "left right")


@pytest.mark.parametrize(("value", "expected"), [
    (None, None), (True, True), (3, 3), (2.5, 2.5), ("é", "é"),
    (float("nan"), None), (float("inf"), None), (float("-inf"), None),
    ((1, (2, 3)), [1, [2, 3]]), (deque([1, 2]), [1, 2]), (Pair(1, 2), [1, 2]),
    ({3, 1, 2}, [1, 2, 3]), (frozenset({"b", "a"}), ["a", "b"]),
    ({1: "a", None: "b", (1, 2): "c", False: "d"}, {"1": "a", "null": "b", "[1,2]": "c",
                                                   "false": "d"}),
    (datetime.datetime(2025, 1, 2, 3, 4, 5), "2025-01-02T03:04:05"),
    (datetime.datetime(2025, 1, 2, tzinfo=datetime.UTC), "2025-01-02T00:00:00+00:00"),
    (datetime.date(2025, 1, 2), "2025-01-02"), (datetime.time(9, 30), "09:30:00"),
    (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
    (Decimal("10.10"), 10.1), (Decimal("0.1"), 0.1),
    (Decimal("3.14159265358979323846264338327950288"), "3.14159265358979323846264338327950288"),
    (Decimal("NaN"), None), (Decimal("1e400"), "1E+400"),
    (Color.RED, "red"), (Color.NESTED, ["a", 1]), (Level.HIGH, 3),
    (Point(1, {"b", "a"}), {"x": 1, "tags": ["a", "b"]}),
    (b"ok\xff", "ok\ufffd"), (bytearray(b"x"), "x"),
    ("a\ud800b", "a\ufffdb"),
    (SneakyStr("kept"), "kept"),
    (OrderedDict([("b", 1), ("a", 2)]), {"b": 1, "a": 2}),
    (MappingProxyType({"k": 1}), {"k": 1}),
])
def test_conversions(value: Any, expected: Any) -> None:
    converted = to_json_safe(value)
    assert converted == expected
    assert type(converted) is type(expected)
    dumps(converted)  # always encodable, NaN included


def test_keys_colliding_as_text_are_an_error_naming_the_place() -> None:
    with pytest.raises(NotData) as caught:
        to_json_safe({"inner": [{True: "x", "true": "y"}]}, root="state")
    assert str(caught.value) == ("the keys True and 'true' are both 'true' as text "
                                 "(at state.inner[0])")
    with pytest.raises(NotData, match="the keys 1 and '1' are both '1' as text"):
        to_json_safe({1: "a", "1": "b"})


def test_mixed_sets_sort_by_json_text() -> None:
    assert to_json_safe({"b", 2, (1, "a")}) == ["b", 2, [1, "a"]]  # '"' < '2' < '['



def test_standard_library_objects_are_reprs_without_addresses() -> None:
    text = to_json_safe(threading.Lock())
    assert text.startswith("<") and "lock object>" in text
    assert "0x" not in text


def test_classes_functions_and_exceptions_are_reprs() -> None:
    assert to_json_safe(Directory) == "<class 'tests.unit.test_jsonsafe.Directory'>"
    assert to_json_safe(ValueError("no")) == "ValueError('no')"
    assert to_json_safe(len) == "<built-in function len>"


def test_a_broken_repr_gives_a_marker() -> None:
    assert to_json_safe(BrokenRepr()) == "<unrepresentable BrokenRepr: RuntimeError>"


def test_cycles_are_an_error_naming_the_place() -> None:
    looping: dict[str, Any] = {"name": "root"}
    looping["self"] = looping
    listing: list[Any] = [1]
    listing.append(listing)
    with pytest.raises(NotData, match=r"this dict contains itself \(at value.self\)"):
        to_json_safe(looping)
    with pytest.raises(NotData, match=r"this list contains itself \(at value\[1\]\)"):
        to_json_safe(listing)


def test_a_child_pointing_back_at_its_parent_is_a_cycle() -> None:
    root = Directory("/")
    child = root.add("my docs")
    child.parent = root
    with pytest.raises(NotData) as caught:
        to_json_safe({"root": root}, root="state")
    assert str(caught.value) == ('a cycle: this Directory contains itself '
                                 '(at state.root.contents["my docs"].parent)')


def test_shared_references_are_not_cycles() -> None:
    shared = {"v": 1}
    assert to_json_safe([shared, shared]) == [{"v": 1}, {"v": 1}]


def test_depth_is_bounded() -> None:
    deep: list[Any] = []
    current = deep
    for _ in range(MAX_DEPTH + 50):
        current.append([])
        current = current[0]
    converted = to_json_safe(deep)
    depth = 0
    while isinstance(converted, list):
        converted = converted[0]
        depth += 1
    assert depth == MAX_DEPTH
    assert converted == "<max depth reached: list>"
    json.dumps(to_json_safe(deep))


def test_ints_too_long_for_str_become_markers() -> None:
    huge = 10 ** 5000
    assert to_json_safe(huge) == f"<int of {huge.bit_length()} bits>"
    assert to_json_safe(10 ** 300) == 10 ** 300


def test_conversion_is_deterministic_and_leaves_the_input_alone() -> None:
    value = {"s": {3, 2, 1}, "t": (1, 2), "d": {"k": [datetime.date(2020, 1, 1)]}}
    first, second = dumps(to_json_safe(value)), dumps(to_json_safe(value))
    assert first == second == '{"s":[1,2,3],"t":[1,2],"d":{"k":["2020-01-01"]}}'
    assert value["s"] == {1, 2, 3} and value["t"] == (1, 2)


def test_dumps_is_compact_and_keeps_non_ascii() -> None:
    assert dumps({"a": [1, "é"]}) == '{"a":[1,"é"]}'


class File:
    def __init__(self, name: str, content: str) -> None:
        self.name = name
        self.content = content
        self._cache = "private"


class Directory:
    def __init__(self, name: str) -> None:
        self.name = name
        self.parent: Directory | None = None
        self.contents: dict[str, Any] = {}
        self.tags: set[Any] = set()

    def add(self, name: str) -> Directory:
        self.contents[name] = Directory(name)
        return self.contents[name]


class Slotted:
    __slots__ = ("amount", "_secret", "unset")

    def __init__(self) -> None:
        self.amount = Decimal("2.50")
        self._secret = 1


class SlottedWithDict(Slotted):
    __slots__ = ("extra", "__dict__")

    def __init__(self) -> None:
        super().__init__()
        self.extra = True
        self.later = "dict"


@dataclasses.dataclass
class Account:
    owner: File
    history: list[File]


def test_objects_are_trees_of_their_public_attributes() -> None:
    root = Directory("/")
    docs = root.add("docs")
    docs.contents["a.txt"] = File("a.txt", "hello")
    root.tags = {File("z", ""), File("b", "")}
    assert to_json_safe(root) == {
        "name": "/", "parent": None,
        "contents": {"docs": {"name": "docs", "parent": None,
                              "contents": {"a.txt": {"name": "a.txt", "content": "hello"}},
                              "tags": []}},
        "tags": [{"name": "b", "content": ""}, {"name": "z", "content": ""}],
    }


def test_slots_come_before_the_dict_and_unset_or_private_slots_are_left_out() -> None:
    assert to_json_safe(Slotted()) == {"amount": 2.5}
    assert list(to_json_safe(SlottedWithDict())) == ["amount", "extra", "later"]


def test_dataclasses_holding_objects_are_walked_too() -> None:
    account = Account(File("o", "x"), [File("h", "1")])
    assert to_json_safe(account) == {"owner": {"name": "o", "content": "x"},
                                     "history": [{"name": "h", "content": "1"}]}


def test_shared_objects_appear_in_each_place() -> None:
    root = Directory("/")
    docs = root.add("docs")
    assert to_json_safe({"root": root, "current": docs})["current"] == {
        "name": "docs", "parent": None, "contents": {}, "tags": []}


def test_object_trees_are_deterministic() -> None:
    def build() -> Directory:
        root = Directory("/")
        root.tags = {File(str(number), "") for number in range(50)}
        return root

    assert dumps(to_json_safe(build())) == dumps(to_json_safe(build()))


class Node:
    """A tree node that links back to its parent and says its state leaves the link out."""

    def __init__(self, name: str, parent: Node | None = None) -> None:
        self.name = name
        self.parent = parent
        self.children: list[Node] = []
        if parent is not None:
            parent.children.append(self)

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name, "children": self.children}


class BrokenState:
    def __getstate__(self) -> dict[str, Any]:
        raise KeyError("gone")


def test_a_class_that_declares_its_state_is_served_as_that_state() -> None:
    root = Node("/")
    Node("docs", root)
    assert to_json_safe({"root": root}) == {
        "root": {"name": "/", "children": [{"name": "docs", "children": []}]}}
    with pytest.raises(NotData, match=r"BrokenState.__getstate__ raised KeyError: 'gone' "
                                      r"\(at value.x\)"):
        to_json_safe({"x": BrokenState()})


class BrokenMapping(dict):
    def items(self):  # type: ignore[override]
        raise RuntimeError("no items")


class OddDict:
    __dict__ = property(lambda self: 42)  # type: ignore[assignment]


def test_containers_and_objects_whose_code_raises_are_reprs() -> None:
    assert to_json_safe({"m": BrokenMapping(a=1)}) == {"m": "{'a': 1}"}
    assert to_json_safe(OddDict()).startswith("<tests.unit.test_jsonsafe.OddDict object")


def _nested(depth: int) -> list[Any]:
    value: list[Any] = ["deep"]
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("value", [
    {"orders": {"o1": {"items": [{"sku": "p", "qty": 2, "price": 2.5}], "note": None,
                       "paid": True, "tags": []}}, "count": 10**30, "é": "ünï"},
    {"nan": float("nan"), "inf": [float("-inf")]},  # NaN as null: the walker's way
    {1: "int key", None: "none key", 2.5: "float key"},  # keys turned into text by the walker
    {"lone": "\ud800"},  # a lone surrogate, replaced
    {"big": 10 ** 5000},  # too long for text
    {"set": {3, 1, 2}, "tuple": (1, 2), "deque": deque([1])},
    _nested(MAX_DEPTH + 20),  # deeper than MAX_DEPTH: cut where the walker cuts
    5, "text", None, 2.5, float("nan"), True, {3, 1}, (1, [2]),  # roots that are no dict
])
def test_the_fast_text_of_a_state_is_the_walkers(value: object) -> None:
    assert to_json_text(value) == dumps(to_json_safe(value))


def test_the_fast_text_keeps_the_walkers_errors() -> None:
    cycle: dict[str, object] = {}
    cycle["self"] = cycle
    for value in (cycle, {1: "a", "1": "b"}):
        with pytest.raises(NotData):
            to_json_text(value, root="state")


def test_a_packages_real_number_is_its_value() -> None:
    """mpmath's ``mpf`` and the like: numbers.Real from outside the standard library."""

    class Real(numbers.Real):  # as a package would define it
        __module__ = "somepackage.numbers"

        def __init__(self, value: float) -> None:
            self._value = value

        def __float__(self) -> float:
            return self._value

    for name in ("__abs__", "__add__", "__ceil__", "__eq__", "__floor__", "__floordiv__",
                 "__le__", "__lt__", "__mod__", "__mul__", "__neg__", "__pos__", "__pow__",
                 "__radd__", "__rfloordiv__", "__rmod__", "__rmul__", "__round__", "__rpow__",
                 "__rtruediv__", "__truediv__", "__trunc__"):
        setattr(Real, name, lambda self, *args: NotImplemented)
    Real.__abstractmethods__ = frozenset()
    assert to_json_safe({"log": Real(2.0), "bad": Real(float("nan"))}) == {"log": 2.0, "bad": None}
