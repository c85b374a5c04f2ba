"""The runtime behind real `process` sandboxes: loading, calls, determinism, checks, limits, cleanup.

The environment below runs only inside sandbox runtimes, never in this process. No Docker needed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import pytest

from envscaler.sandbox.backends.process import ProcessBackend
from envscaler.sandbox.checkers import CheckBudget, CheckerPool
from envscaler.sandbox.config import parse_size
from envscaler.sandbox.client import RuntimeClient
from envscaler.sandbox.config import SandboxConfig
from envscaler.sandbox.errors import CallTimeout, RuntimeFault, SandboxGone, SandboxUnavailable
from envscaler.sandbox.sandbox import Sandbox
from envscaler.sandbox.socketroot import MARKER_NAME
from tests.conftest import REPO_ROOT, TEST_LABELS, new_instance
from tests.deadlines import scaled

ENV_SOURCE = '''
import datetime
import random
import time
import uuid
from typing import Dict, TypedDict


class Note(TypedDict):
    text: str
    tag: str
    created_at: str


class Notebook:
    """Notes with generated ids and timestamps, as generated environments have."""

    LIMIT = 10  # a class attribute, not a tool

    def __init__(self, init_config: dict):
        self.notes: Dict[str, Note] = {}
        self.owner = "nobody"
        self.init_config = init_config
        self._secret = "not state"

    @property
    def size(self) -> int:
        return len(self.notes)

    def _helper(self) -> int:
        return 42

    def add_note(self, text: str, tag: str = "misc") -> dict:
        """Store a note stamped with the clock, a uuid and a random draw."""
        note_id = str(uuid.uuid4())
        self.notes[note_id] = {"text": text, "tag": tag,
                               "created_at": datetime.datetime.now().isoformat(),
                               "stamp": time.time(), "luck": random.random()}
        return {"success": True, "data": {"note_id": note_id, **self.notes[note_id]}}

    def list_notes(self) -> dict:
        return {"success": True, "data": self.notes}

    def fail(self, reason: str) -> dict:
        raise ValueError(reason)

    def huge(self, size: int) -> str:
        return "x" * size

    def spin(self) -> None:
        while True:
            pass

    def unlisted(self) -> str:
        return "not advertised"
'''
TOOLS = ["add_note", "list_notes", "fail", "huge", "spin"]
INIT_CONFIG = {"owner": "ada", "notes": {"n0": {"text": "seed note", "tag": "init",
                                                "created_at": "2024-12-31T00:00:00"}}}
MAX_RESULT_BYTES = 100_000


@pytest.fixture
async def backend(process_config: SandboxConfig) -> AsyncIterator[ProcessBackend]:
    backend = ProcessBackend(process_config, new_instance())
    await backend.start()
    yield backend
    await backend.close()
    assert not (process_config.socket_root / backend.instance).exists()


async def open_sandbox(backend: ProcessBackend, *, seed: int = 1,
                       init_config: dict[str, Any] | None = None) -> Sandbox:
    sandbox = Sandbox(await backend.create(TEST_LABELS), backend)
    tools = await sandbox.load(source=ENV_SOURCE, class_name="Notebook", tools=TOOLS,
                               init_config=INIT_CONFIG if init_config is None else init_config,
                               seed=seed, max_result_bytes=MAX_RESULT_BYTES, timeout=scaled(10))
    assert tools == TOOLS
    return sandbox


async def fault(awaitable: Awaitable[Any]) -> RuntimeFault:
    with pytest.raises(RuntimeFault) as caught:
        await awaitable
    return caught.value


def alive(pid: int) -> bool:
    """Running and not a zombie (a killed child of a dead parent may wait a moment for init)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_load_call_and_state(backend: ProcessBackend) -> None:
    sandbox = await open_sandbox(backend)
    added = await sandbox.call("add_note", {"text": "hello", "tag": "greeting"}, timeout=scaled(5))
    listed = await sandbox.call("list_notes", {}, timeout=scaled(5))
    state = await sandbox.state(timeout=scaled(5))
    assert added["success"] is True
    note_id = added["data"]["note_id"]
    assert added["data"]["created_at"] == "2025-01-01T09:00:01"  # 1 s per call from 09:00:00
    assert set(listed["data"]) == {"n0", note_id}
    # As in EnvScaler, the constructor's config and the attributes share objects: the stored
    # init_config shows what tools did to `notes` (the snapshot for `initial_state` does not).
    assert state == {"notes": listed["data"], "owner": "ada",
                     "init_config": {"owner": "ada", "notes": listed["data"]}}
    assert "_secret" not in state and "LIMIT" not in state and "size" not in state


async def test_a_tool_exception_is_a_result_and_the_session_goes_on(backend: ProcessBackend) -> None:
    sandbox = await open_sandbox(backend)
    error = await fault(sandbox.call("fail", {"reason": "disk on fire"}, timeout=scaled(5)))
    after = await sandbox.call("add_note", {"text": "still here"}, timeout=scaled(5))
    assert error.kind == "ToolException"
    line = ENV_SOURCE.splitlines().index("        raise ValueError(reason)") + 1
    assert error.message == f"ValueError: disk on fire (env.py line {line}: raise ValueError(reason))"
    assert after["success"] is True


async def test_arguments_that_do_not_bind_never_run_the_tool(backend: ProcessBackend) -> None:
    sandbox = await open_sandbox(backend)
    unexpected = await fault(sandbox.call("add_note", {"text": "x", "color": "red"},
                                          timeout=scaled(5)))
    missing = await fault(sandbox.call("add_note", {"tag": "t"}, timeout=scaled(5)))
    assert (unexpected.kind, unexpected.message) == \
        ("ArgumentError", "add_note: got an unexpected keyword argument 'color'")
    assert (missing.kind, missing.message) == \
        ("ArgumentError", "add_note: missing a required argument: 'text'")
    assert set((await sandbox.state(timeout=scaled(5)))["notes"]) == {"n0"}
    added = await sandbox.call("add_note", {"text": "ok"}, timeout=scaled(5))
    assert added["data"]["created_at"] == "2025-01-01T09:00:01"  # rejected calls left no trace


@pytest.mark.parametrize("name", ["_helper", "__init__", "__class__", "__dict__", "LIMIT", "size",
                                  "notes", "owner", "unlisted", "", "add_note.__globals__"])
async def test_only_advertised_tools_are_callable(backend: ProcessBackend, name: str) -> None:
    sandbox = await open_sandbox(backend)
    error = await fault(sandbox.call(name, {}, timeout=scaled(5)))
    assert error.kind == "ToolNotFound"
    assert error.message == f"{name!r} is not a tool of Notebook"


@pytest.mark.parametrize(("source", "class_name", "tools", "message"), [
    (ENV_SOURCE, "Notebook", ["LIMIT"], "tool 'LIMIT' of Notebook is a int, not a method"),
    (ENV_SOURCE, "Notebook", ["size"], "tool 'size' of Notebook is a property, not a method"),
    (ENV_SOURCE, "Notebook", ["_helper"], "tool '_helper' is private"),
    (ENV_SOURCE, "Notebook", ["nothing"], "tool 'nothing' is not defined by Notebook"),
    (ENV_SOURCE, "Missing", [], "'Missing' is not defined in the source"),
    (ENV_SOURCE, "Note", [], "reading the state of Note failed: TypeError: vars() argument"),
    ("x = 1\nraise KeyError('boom')\n", "X", [], "KeyError: 'boom' (env.py line 2:"),
    ("class X:\n    def f(self):\n        return (\n", "X", [], "SyntaxError: '(' was never closed"),
    ("class X:\n    def __init__(self, config):\n        self.v = config['v']\n", "X", [],
     "instantiating X raised KeyError: 'v' (env.py line 3: self.v = config['v'])"),
])
async def test_load_errors_name_the_problem(backend: ProcessBackend, source: str, class_name: str,
                                            tools: list[str], message: str) -> None:
    sandbox = Sandbox(await backend.create(TEST_LABELS), backend)
    error = await fault(sandbox.load(source=source, class_name=class_name, tools=tools,
                                     init_config={}, seed=0, max_result_bytes=MAX_RESULT_BYTES,
                                     timeout=scaled(10)))
    assert error.kind == "LoadError"
    assert message in error.message
    # a failed load unloads
    assert (await fault(sandbox.state(timeout=scaled(5)))).kind == "NotLoaded"


async def test_construction_follows_envscaler(backend: ProcessBackend) -> None:
    """``cls(init_config)`` when the constructor takes it, else ``cls()``; then every key is set."""
    source = ("class NoArgs:\n    def __init__(self):\n        self.made = True\n"
              "class Keyword:\n    def __init__(self, *, flag=False):\n        self.flag = flag\n")
    sandbox = Sandbox(await backend.create(TEST_LABELS), backend)
    for class_name, expected in (("NoArgs", {"made": True, "extra": [1]}),
                                 ("Keyword", {"flag": False, "extra": [1]})):
        await sandbox.load(source=source, class_name=class_name, tools=[], init_config={"extra": [1]},
                           seed=0, max_result_bytes=MAX_RESULT_BYTES, timeout=scaled(10))
        assert await sandbox.state(timeout=scaled(5)) == expected


async def run_script(sandbox: Sandbox) -> list[str]:
    """A fixed sequence of operations; every reply as the exact JSON text the runtime sent."""
    replies = []
    for text in ("first", "second", "third"):
        replies.append(await sandbox.call("add_note", {"text": text}, timeout=scaled(5)))
    replies.append(await sandbox.call("list_notes", {}, timeout=scaled(5)))
    replies.append(await sandbox.state(timeout=scaled(5)))
    return [json.dumps(reply, separators=(",", ":"), ensure_ascii=False) for reply in replies]


async def test_same_seed_and_calls_give_identical_bytes(backend: ProcessBackend) -> None:
    first, second = await open_sandbox(backend, seed=11), await open_sandbox(backend, seed=11)
    # a ping and a snapshot in between must not disturb the clock or the generators
    await second.ping()
    await second.snapshot(timeout=scaled(5))
    script = await run_script(first)
    assert script == await run_script(second)
    other = [json.loads(reply) for reply in await run_script(await open_sandbox(backend, seed=12))]
    mine = [json.loads(reply) for reply in script]
    assert other[0]["data"]["note_id"] != mine[0]["data"]["note_id"]
    assert other[0]["data"]["luck"] != mine[0]["data"]["luck"]
    assert other[0]["data"]["created_at"] == mine[0]["data"]["created_at"]  # time is not seeded


async def test_reset_restores_the_initial_state_and_replays_identically(backend: ProcessBackend) -> None:
    sandbox = await open_sandbox(backend, seed=5)
    initial = await sandbox.state(timeout=scaled(5))
    script = await run_script(sandbox)
    assert await sandbox.state(timeout=scaled(5)) != initial
    assert await sandbox.reset(init_config=INIT_CONFIG, seed=5, timeout=scaled(10)) == TOOLS
    assert await sandbox.state(timeout=scaled(5)) == initial
    assert await run_script(sandbox) == script


async def test_reset_with_a_new_init_config(backend: ProcessBackend) -> None:
    sandbox = await open_sandbox(backend)
    await sandbox.call("add_note", {"text": "temporary"}, timeout=scaled(5))
    new_config = {"owner": "grace", "extra": {"k": 1}}
    await sandbox.reset(init_config=new_config, seed=1, timeout=scaled(10))
    state = await sandbox.state(timeout=scaled(5))
    assert state == {"notes": {}, "owner": "grace", "init_config": new_config, "extra": {"k": 1}}


async def test_results_over_the_cap_are_refused_and_the_session_goes_on(backend: ProcessBackend) -> None:
    sandbox = await open_sandbox(backend)
    error = await fault(sandbox.call("huge", {"size": 200_000}, timeout=scaled(5)))
    assert error.kind == "ResultTooLarge"
    assert error.message == ("huge returned 200002 bytes of JSON; the limit is "
                             f"{MAX_RESULT_BYTES} bytes")
    assert await sandbox.call("huge", {"size": 3}, timeout=scaled(5)) == "xxx"


def verdict(passed: bool, error: str | None, exhausted: str | None) -> dict[str, Any]:
    return {"passed": passed, "error": error, "exhausted": exhausted}


async def test_checks_judged_by_a_checker_on_the_snapshot(backend: ProcessBackend) -> None:
    """A checker sandbox judges the states of a snapshot: each check in a child of its own, with
    a CPU budget, its own copy of the states and a capped verdict."""
    sandbox = await open_sandbox(backend)
    checkers = CheckerPool(backend, size=1, max_waiting=4, wait_timeout=10)
    await checkers.start()
    await sandbox.call("add_note", {"text": "hello"}, timeout=scaled(5))
    checks = [
        ("def check_func(final_state):\n    return any(n['text'] == 'hello' "
         "for n in final_state['notes'].values())"),
        "def check_func(final_state):\n    return final_state['owner'] == 'bob'",
        "def check_func(final_state):\n    return final_state['missing']",
        "def check_func(final_state):\n    return 1",
        "def check_func(final_state):\n    while True:\n        pass",
        ("def check_func(final_state):\n    final_state['notes'].clear()\n"
         "    initial_state.clear()\n    print('noise' * 100000)\n    return True"),
        ("def check_func(final_state):\n    return len(final_state['notes']) == "
         "len(initial_state['notes']) + 1 == 2"),
        "def helper(final_state):\n    return True",
        "import sys\nsys.exit(0)",
        ("import os\ndef check_func(final_state):\n"
         "    os.write(3, b'x' * 200000)\n    return True"),  # fd 3: the child's verdict pipe
    ]
    snapshot = await sandbox.snapshot(timeout=scaled(5))
    verdicts = await checkers.check(checks, snapshot,
                                    CheckBudget(cpu_seconds=1, memory_bytes=64 << 20))
    await checkers.close()
    assert verdicts == [verdict(passed, error, exhausted) for passed, error, exhausted in [
        (True, None, None),
        (False, None, None),
        (False, "KeyError: 'missing'", None),
        (False, "check_func returned int, not bool", None),
        (False, "check exceeded its CPU time budget of 1 s", "time"),  # not judged: out of time
        (True, None, None),
        (True, None, None),  # the mutations of the check before were its own
        (False, "the source does not define a function check_func(final_state)", None),
        (False, "SystemExit: 0", None),
        (False, "check wrote more than 65536 bytes of verdict", None),
    ]]
    # checks never touch the state
    assert set((await sandbox.state(timeout=scaled(5)))["notes"]) != set()


async def test_an_endless_call_times_out_and_recycles_the_sandbox(backend: ProcessBackend) -> None:
    sandbox = await open_sandbox(backend)
    pid = (await sandbox.ping())["pid"]
    directory = backend.directory(sandbox.handle)
    started = time.monotonic()
    with pytest.raises(CallTimeout):
        await sandbox.call("spin", {}, timeout=scaled(1))
    assert time.monotonic() - started < 3
    assert not alive(pid)
    assert not directory.exists()
    assert not await backend.is_running(sandbox.handle)
    assert await backend.list_own() == []
    replacement = await open_sandbox(backend)
    assert (await replacement.call("add_note", {"text": "fresh"},
                                   timeout=scaled(5)))["success"] is True


async def test_ping_answers_while_a_call_runs(backend: ProcessBackend) -> None:
    sandbox = await open_sandbox(backend)
    busy = RuntimeClient(backend.socket_path(sandbox.handle), backend.secret(sandbox.handle))
    probe = RuntimeClient(backend.socket_path(sandbox.handle), backend.secret(sandbox.handle))
    spinning = asyncio.create_task(busy.request({"op": "call", "name": "spin", "arguments": {}}))
    await asyncio.sleep(0.3)
    started = time.monotonic()
    reply = await asyncio.wait_for(probe.request({"op": "ping"}), scaled(2))
    assert time.monotonic() - started < 0.5
    assert reply["loaded"] is True
    assert not spinning.done()
    probe.close()
    await sandbox.destroy()
    with pytest.raises(SandboxGone):
        await spinning


async def test_destroy_leaves_no_process_and_no_directory(backend: ProcessBackend) -> None:
    sandbox = await open_sandbox(backend)
    pid = (await sandbox.ping())["pid"]
    directory = backend.directory(sandbox.handle)
    assert await backend.is_running(sandbox.handle)
    assert (await backend.health())["live"] == 1
    await sandbox.destroy()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped, not a zombie
    assert not directory.exists()
    assert await backend.health() == {"backend": "process", "isolation": "process", "live": 0}
    await backend.destroy(sandbox.handle)  # idempotent


async def test_a_runtime_that_cannot_start_is_reported_and_cleaned_up(process_config: SandboxConfig) -> None:
    config = SandboxConfig(sandbox_backend="process", socket_root=process_config.socket_root,
                           sandbox_memory="20m", start_timeout=3)
    backend = ProcessBackend(config, new_instance())
    with pytest.raises(SandboxUnavailable, match="sandbox runtime"):
        await backend.create(TEST_LABELS)
    assert await backend.list_own() == []
    assert [p.name for p in (config.socket_root / backend.instance).iterdir()] == [MARKER_NAME]
    await backend.close()


GATEWAY_SCRIPT = """
import asyncio, sys
from pathlib import Path
from envscaler.sandbox.backends.process import ProcessBackend
from envscaler.sandbox.checkers import CheckBudget, CheckerPool
from envscaler.sandbox.client import RuntimeClient
from envscaler.sandbox.config import SandboxConfig

async def main():
    config = SandboxConfig(sandbox_backend="process", socket_root=Path(sys.argv[1]),
                           heartbeat_interval=0.1)
    backend = ProcessBackend(config, sys.argv[2])
    handle = await backend.create({})
    socket_path = backend.socket_path(handle)
    reply = await RuntimeClient(socket_path, backend.secret(handle)).request({"op": "ping"})
    print(reply["pid"], socket_path, flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


async def test_runtimes_die_with_their_gateway_and_orphans_are_reaped(backend: ProcessBackend) -> None:
    root = backend.config.socket_root
    dead_instance = new_instance()
    gateway = subprocess.Popen(  # noqa: ASYNC220 - a stand-in gateway process
        [sys.executable, "-c", GATEWAY_SCRIPT, str(root), dead_instance], cwd=REPO_ROOT,
        stdout=subprocess.PIPE, text=True)
    assert gateway.stdout is not None
    pid_text, socket_path = gateway.stdout.readline().split()
    runtime_pid = int(pid_text)
    assert alive(runtime_pid)
    gateway.send_signal(signal.SIGKILL)
    gateway.wait()
    gateway.stdout.close()
    deadline = time.monotonic() + scaled(5)
    while alive(runtime_pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not alive(runtime_pid)  # PR_SET_PDEATHSIG
    assert Path(socket_path).parent.exists()
    # Liveness is judged with the judge's own interval: a reaper that expects beats every 0.1 s.
    reaper = ProcessBackend(dataclasses.replace(backend.config, heartbeat_interval=0.1),
                            new_instance())
    await asyncio.sleep(0.4)
    assert await reaper.reap_orphans() >= 1
    assert not (root / dead_instance).exists()


@pytest.mark.parametrize(("text", "size"), [("256m", 256 * 2**20), ("1g", 2**30), ("512k", 2**19),
                                            ("1024", 1024), ("1.5GiB", 3 * 2**29), ("64MB", 2**26)])
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_parse_size_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")
