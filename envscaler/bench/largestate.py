"""The large-state figures: `order_desk` (``envscaler/bench/envs/order_desk``, an order-management back
office) served with a generated database of 1, 3 and 30 MB beside a small environment on the same
gateway: open, a read-only call, a state read, a solved episode's validation, and what Redis keeps
per closed session.

The databases are generated here, deterministically, into a scratch catalogue (never committed):
each size is a data file of the environment (``data/db-<size>.json``) and one scenario built on
it (``init_data``) whose merge patch moves one order, and whose reference solution cancels one
order and re-addresses another.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envscaler.bench.http import HttpConnection
from envscaler.bench.stats import summary
from envscaler.bench.workload import Probe
from envscaler.format.loader import ENV_DATA
from envscaler.sandbox.runtime import mergepatch

ENV_ID = "order_desk"
ENV_DIR = Path(__file__).parent / "envs" / ENV_ID
SIZES_MB = (1, 3, 30)
PRODUCTS = 400
ORDERS_PER_CUSTOMER = 8
NEW_ADDRESS = "17 Harbour Lane, Portsmouth PO1 3AX"
SOLUTION = [{"name": "get_customer", "arguments": {"customer_id": "C-000001"}},
            {"name": "list_customer_orders",
             "arguments": {"customer_id": "C-000001", "status": "placed"}},
            {"name": "cancel_order", "arguments": {"order_id": "O-0000001"}},
            {"name": "update_shipping_address",
             "arguments": {"order_id": "O-0000002", "shipping_address": NEW_ADDRESS}}]


@dataclass(frozen=True)
class Sized:
    """One generated scenario: its id and the bytes of its state as JSON."""

    scenario: str
    state_bytes: int


def scenario_id(megabytes: float) -> str:
    return f"{ENV_ID}-{megabytes:g}mb"


def _orders(rng: random.Random, products: dict[str, Any], budget: int) -> Iterator[dict[str, Any]]:
    """Orders until their JSON reaches ``budget`` bytes; the first two are the task's, placed."""
    skus, used, number = sorted(products), 0, 0
    statuses = ("placed", "shipped", "delivered", "delivered", "cancelled")
    while used < budget:
        number += 1
        items = [{"sku": sku, "quantity": rng.randint(1, 4), "unit_price": products[sku]["price"]}
                 for sku in rng.sample(skus, rng.randint(1, 4))]
        order = {"order_id": f"O-{number:07d}",
                 "customer_id": f"C-{(number - 1) // ORDERS_PER_CUSTOMER + 1:06d}",
                 "status": "placed" if number <= 2 else rng.choice(statuses), "items": items,
                 "total": round(sum(i["quantity"] * i["unit_price"] for i in items), 2),
                 "shipping_address": f"{rng.randint(1, 999)} Market Street, Leeds LS{number % 30}",
                 "created": f"2026-{rng.randint(1, 10):02d}-{rng.randint(1, 28):02d}"}
        used += len(json.dumps(order))
        yield order


def database(megabytes: float, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    products = {f"P-{n:04d}": {"sku": f"P-{n:04d}", "name": f"Product {n}",
                               "price": round(rng.uniform(2, 300), 2), "stock": rng.randint(0, 500)}
                for n in range(1, PRODUCTS + 1)}
    orders = {o["order_id"]: o for o in _orders(rng, products, int(megabytes * 1_000_000))}
    customers = {f"C-{n:06d}": {"customer_id": f"C-{n:06d}", "name": f"Customer {n}",
                                "email": f"customer{n}@shop.example",
                                "tier": "gold" if n % 7 == 0 else "standard"}
                 for n in range(1, len(orders) // ORDERS_PER_CUSTOMER + 2)}
    return {"customers": customers, "products": products, "orders": orders}


def _check(name: str, body: str) -> dict[str, str]:
    return {"item": name, "check_func": f"def check_func(final_state):\n    {body}\n"}


def data_file(megabytes: float) -> str:
    return f"db-{megabytes:g}mb.json"


def scenario(megabytes: float, state: dict[str, Any]) -> dict[str, Any]:
    """The scenario line over ``state`` (the database of ``data_file(megabytes)``)."""
    patch = {"orders": {"O-0000002": {"shipping_address": "2 Old Road, Leeds LS1"}}}
    state = mergepatch.apply(state, patch)
    first = state["orders"]["O-0000001"]
    restocked = {i["sku"]: state["products"][i["sku"]]["stock"] + i["quantity"]
                 for i in first["items"]}
    cancelled = sum(o["status"] == "cancelled" for o in state["orders"].values()) + 1
    checks = [
        _check("Has order O-0000001 been cancelled?",
               'return final_state["orders"]["O-0000001"]["status"] == "cancelled"'),
        _check("Are its items back in stock?",
               'return all(final_state["products"][s]["stock"] == n '
               f'for s, n in {restocked!r}.items())'),
        _check("Does order O-0000002 ship to the new address?",
               f'return final_state["orders"]["O-0000002"]["shipping_address"] == {NEW_ADDRESS!r}'),
        _check("Was no other order cancelled?",
               'return sum(o["status"] == "cancelled" for o in final_state["orders"].values()) '
               f'== {cancelled}')]
    return {"id": scenario_id(megabytes), "split": "eval",
            "task": "Customer C-000001 asks to cancel order O-0000001 and to ship order O-0000002 "
                    f"to {NEW_ADDRESS}.",
            "init_data": data_file(megabytes), "init_config": patch, "checklist": checks,
            "solution": SOLUTION}


def write_catalogue(root: Path, sizes: tuple[float, ...] = SIZES_MB,
                    beside: tuple[Path, ...] = ()) -> list[Sized]:
    """A catalogue at ``root``: `order_desk` with one scenario per size, and copies of the
    environment folders ``beside`` (the small environment to compare with)."""
    folder = root / ENV_ID
    (folder / ENV_DATA).mkdir(parents=True)
    for name in ("env.py", "env.json"):
        shutil.copyfile(ENV_DIR / name, folder / name)
    for env_dir in beside:
        shutil.copytree(env_dir, root / env_dir.name)
    sized = []
    with (folder / "scenarios.jsonl").open("w") as out:
        for megabytes in sizes:
            state = database(megabytes)
            text = json.dumps(state)
            (folder / ENV_DATA / data_file(megabytes)).write_text(text)
            line = scenario(megabytes, state)
            sized.append(Sized(line["id"], len(text)))
            out.write(json.dumps(line) + "\n")
    return sized


def small_calls(port: int, probe: Probe, calls: int) -> dict[str, Any]:
    """The small environment's probe call, one at a time, on the same gateway."""
    with HttpConnection("127.0.0.1", port, timeout=300) as conn:
        _, body = conn.timed("POST", "/v1/sessions", {"env": probe.env,
                                                      "scenario": probe.scenario})
        session = body["session_id"]
        seconds = [conn.timed("POST", f"/v1/sessions/{session}/calls", probe.body())[0]
                   for _ in range(calls)]
        conn.timed("DELETE", f"/v1/sessions/{session}")
    return summary(seconds)


def measure(port: int, scenario_: str, *, opens: int, calls: int, states: int,
            validations: int) -> dict[str, Any]:
    """One size: each figure one request at a time over one connection. A start the gateway
    refuses (413 ``StateTooLarge``) is a figure too: the limit it names. The first open, which
    makes the scenario's start in the gateway (once per gateway), is not timed."""
    with HttpConnection("127.0.0.1", port, timeout=300) as conn:
        status, raw = conn.request("POST", "/v1/sessions", {"env": ENV_ID, "scenario": scenario_})
        if status == 413:
            return {"refused": json.loads(raw)["error"]["message"]}
        if status != 201:
            raise RuntimeError(f"opening {scenario_} answered {status}: {raw[:300]!r}")
        open_s, sessions = [], [json.loads(raw)["session_id"]]
        for _ in range(opens):
            seconds, body = conn.timed("POST", "/v1/sessions", {"env": ENV_ID,
                                                                "scenario": scenario_})
            open_s.append(seconds)
            sessions.append(body["session_id"])
        session = sessions[0]
        call = {"name": "get_order", "arguments": {"order_id": "O-0000002"}}
        call_s = [conn.timed("POST", f"/v1/sessions/{session}/calls", call)[0]
                  for _ in range(calls)]
        state_s = [conn.timed("GET", f"/v1/sessions/{session}/state")[0] for _ in range(states)]
        for step in SOLUTION:
            conn.timed("POST", f"/v1/sessions/{session}/calls", step)
        validate_s, verdict = _validations(conn, session, validations)
        for session_id in sessions:
            conn.timed("DELETE", f"/v1/sessions/{session_id}")
    return {"open": summary(open_s), "call": summary(call_s), "state": summary(state_s),
            "validate": summary(validate_s), **verdict, "sessions": len(sessions)}


def shared_custom_start(port: int, redis_memory: Callable[[], int], megabytes: float,
                        sessions: int) -> dict[str, Any]:
    """``sessions`` sessions opened with one caller's own ``init_config`` of ``megabytes`` (the
    database, sent in each request): what Redis grows by while they live. It keeps that start
    once, under its digest, however many sessions use it."""
    body = {"env": ENV_ID, "init_config": database(megabytes)}
    before = redis_memory()
    with HttpConnection("127.0.0.1", port, timeout=300) as conn:
        opened = [conn.timed("POST", "/v1/sessions", body)[1]["session_id"]
                  for _ in range(sessions)]
        grown = redis_memory() - before
        for session_id in opened:
            conn.timed("DELETE", f"/v1/sessions/{session_id}")
    return {"init_bytes": len(json.dumps(body["init_config"], separators=(",", ":"))),
            "sessions": sessions, "redis_growth_bytes": grown}


def _validations(conn: HttpConnection, session: str,
                 count: int) -> tuple[list[float], dict[str, Any]]:
    """Validation times and the reward; a validation the gateway cannot judge (500
    ``CheckExhausted``: the checks ran out of their budget) is a figure too: its error."""
    seconds: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        status, raw = conn.request("POST", f"/v1/sessions/{session}/validate")
        seconds.append(time.perf_counter() - started)
        body = json.loads(raw)
        if status != 200:
            error = body["error"]
            return seconds, {"reward": None, "no_reward": f"{error['type']}: {error['message']}"}
    return seconds, {"reward": body["reward"]}
