"""Schema-driven arguments for the executable gate."""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator

from envscaler.format import derive_tools
from envscaler.synth.gates.argsgen import ValuePool, generate_cases

SOURCE = '''
from typing import Dict, List, Literal, Optional, TypedDict


class Line(TypedDict):
    sku: str
    quantity: int


class Shop:
    def __init__(self, init_config: dict):
        self.orders = {}

    def place_order(self, customer_id: str, lines: List[Line], priority: Literal["low", "high"],
                    express: bool = False, note: Optional[str] = None, weight: float = 1.0,
                    tags: Dict[str, str] = None, **extra) -> dict:
        return {"success": True}

    def get_order(self, order_id: str, verbose: bool = False) -> dict:
        return {"success": True}

    def reschedule(self, order_id: str, new_slot_id: str, when: str) -> dict:
        return {"success": True}

    def ping(self) -> dict:
        return {"success": True}

    def anything(self, value) -> dict:
        return {"success": True}
'''
TOOLS = {tool["function"]["name"]: tool for tool in derive_tools(SOURCE, "Shop")}
STATE: dict[str, Any] = {
    "orders": {"O-1": {"order_id": "O-1", "customer_id": "C-7", "status": "open", "total": 12.5},
               "O-2": {"order_id": "O-2", "customer_id": "C-9", "status": "done", "total": 3}},
    "slots": {"S-1": {"slot_id": "S-1"}},
    "customers": {"C-7": {"customer_id": "C-7", "name": "Ada"}},
}


def cases_of(name: str, count: int = 3, seed: int = 0) -> list[Any]:
    return generate_cases(TOOLS[name], ValuePool.from_state(STATE), seed, count)


def test_the_pool_finds_ids_by_container_and_by_field() -> None:
    pool = ValuePool.from_state(STATE)
    assert pool.candidates("order_id") == ["O-1", "O-2"]
    assert pool.candidates("customer_id") == ["C-7", "C-9"]
    assert pool.candidates("new_slot_id") == ["S-1"]
    assert pool.candidates("status") == ["done", "open"]


def test_every_case_fits_the_schema() -> None:
    """The gateway refuses any other arguments before a tool sees them."""
    for name, tool in TOOLS.items():
        validator = Draft202012Validator(tool["function"]["parameters"])
        cases = cases_of(name, count=5)
        assert cases, name
        for case in cases:
            assert validator.is_valid(case.arguments), (name, case)


def test_strategies_hit_the_state_and_miss_it() -> None:
    valid = [case for case in cases_of("get_order")]
    assert [case.note for case in valid] == ["state values", "fresh values", "edge values"]
    assert valid[0].arguments["order_id"] in ("O-1", "O-2")
    assert valid[1].arguments == {"order_id": "gate-order_id-2"}  # required parameters only
    assert valid[2].arguments == {"order_id": "", "verbose": False}
    when = [case.arguments["when"] for case in cases_of("reschedule")]
    assert when[1] == "2025-02-04T10:30:00"  # a plausible date-time for a *when* parameter


def test_a_tool_without_parameters_gets_one_empty_case() -> None:
    assert [case.arguments for case in cases_of("ping")] == [{}]


def test_nested_records_and_enums_are_generated() -> None:
    valid = [case.arguments for case in cases_of("place_order")]
    assert valid[0]["priority"] in ("low", "high")
    assert all(set(line) == {"sku", "quantity"} for line in valid[0]["lines"])
    assert valid[2]["lines"] == [] and valid[2]["note"] is None


def test_generation_is_deterministic_and_seeded() -> None:
    first = [json.dumps(case.to_dict(), sort_keys=True) for case in cases_of("place_order")]
    again = [json.dumps(case.to_dict(), sort_keys=True) for case in cases_of("place_order")]
    assert first == again
    other = [json.dumps(case.to_dict(), sort_keys=True)
             for case in cases_of("place_order", seed=99)]
    assert other != first
