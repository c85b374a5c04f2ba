"""The checker: runs check functions in children forked from this warm interpreter.

Rewards must not be forgeable by the code they judge, so checks never run where environment code
ran: a checker is its own locked-down sandbox that never loads an environment. It receives the
initial and final state as JSON texts, and the check sources, which it compiles once. A fork of
this warm interpreter costs about a millisecond, against ~12 ms for a fresh interpreter, and a
validation costs one fork when its checks answer: a first pass runs them all in one child, each
on states freshly parsed from their JSON texts, with the builtins restored and under a CPU timer
of its own budget. (The checker itself never parses the states: objects it held would be pages
that the parent and child both copy on their first write.) Every check that does not answer a
bool there (it raised, ran out of budget, ended the child, or was never reached) is judged again
alone, in a child of its own, so every error is the one the check earns by itself. (A check that
patches a module can still sway the checks after it in its own checklist's first pass; never
another validation's.)

A verdict is ``{"passed", "error", "exhausted"}``. ``exhausted`` tells a check that ran out of
what it was given from one that was judged: ``"time"`` when it spent its CPU budget or reached
its wall deadline without finishing, ``"memory"`` when it hit its address-space limit
(``MemoryError``) or the kernel's OOM killer ended it; None otherwise (it answered, or earned its
error: it raised, returned a non-bool, exited, said too much). An exhausted check was never
judged, so it fails with ``passed: false`` only for want of a verdict: the gateway turns it into
an error of the validation, never into a reward. Each child has

- a CPU-time budget (``RLIMIT_CPU``, and the exact figure from ``wait4``), so a verdict never
  depends on how busy the machine is;
- an address-space limit, so a greedy check runs out of memory alone;
- its own copy of the states (parsed by each check), so a check that mutates them changes
  nothing for the others;
- only its verdict pipe open (every inherited descriptor, the gateway's connection included, is
  closed), with the verdicts capped at ``MAX_VERDICT_BYTES``;
- a wall deadline far above its CPU budget. A child alone that reaches it without having spent
  its budget was either blocked (it waited: out of time, as a check that never ends) or starved
  of CPU by the machine: then the whole validation answers ``Starved``, which the gateway turns
  into a retryable 503, never into a reward computed from starved checks.

In a container (``contained``) the checker is alone with its children: before and after every
validation it kills every other process it can see, so nothing a check started (even in a new
session or process group) outlives its validation. There it runs as root with only the rights to
change user and to kill, and each child drops to the untrusted user before the check runs
(``contain.drop_privileges``), so a check cannot signal or trace the checker.
"""

from __future__ import annotations

import builtins
import functools
import gc
import json
import math
import os
import resource
import selectors
import signal
import socket
import time
import types
from dataclasses import dataclass, field
from typing import Any

from envscaler.sandbox.runtime import contain, protocol
from envscaler.sandbox.runtime.protocol import Field, OperationError, describe_exception, parse_request

CHECK_FILENAME = "check.py"
MAX_VERDICT_BYTES = 64 * 1024
MAX_CHECKS = 256
COMPILED_CACHE_SIZE = 1024  # distinct check sources kept compiled (typically under a KiB each)
VERDICT_FD = 3
STARVED_SHARE = 0.8
TIME, MEMORY = "time", "memory"  # what an exhausted check ran out of
FIRST_PASS_GRACE_SECONDS = 1.0  # a check's real time in the first pass, beyond its CPU budget
EXIT_POLL_SECONDS = 0.01  # how often children that closed no pipe are checked for having exited
_READ_CHUNK = 65536
_CHILD_OPEN_FILES = 16

FIELDS: dict[str, dict[str, Field]] = {
    "ping": {},
    "check": {"checks": Field((list,), True), "initial_state": Field((str,), True),
              "final_state": Field((str,), True), "cpu_seconds": Field(protocol.NUMBER, True),
              "wall_seconds": Field(protocol.NUMBER, True), "memory_bytes": Field((int,), True)},
}


@dataclass(frozen=True)
class Budget:
    """What one check may spend."""

    cpu_seconds: float
    wall_seconds: float
    memory_bytes: int


@dataclass
class _Child:
    pid: int
    fd: int
    verdict: bytearray = field(default_factory=bytearray)
    overflowed: bool = False
    status: int | None = None  # wait status once reaped
    cpu_seconds: float = 0.0
    starved: bool = False
    blocked: bool = False


@functools.lru_cache(maxsize=COMPILED_CACHE_SIZE)
def compiled(source: str) -> types.CodeType:
    """A check's code, compiled by the checker itself: compiling runs none of it, and the same
    checks come back with every episode of their scenario (compiling them in each child cost a
    fifth of a validation). As a fresh module: no ``__future__`` flag of this one."""
    return compile(source, CHECK_FILENAME, "exec", dont_inherit=True)


def evaluate(code: types.CodeType, initial_json: str, final_json: str) -> dict[str, Any]:
    """EnvScaler semantics: the code runs with a global ``initial_state``, then
    ``check_func(final_state)`` decides; only ``True`` passes and only a bool is an answer. The
    states are parsed here, so each check has its own."""
    try:
        initial_state, final_state = _state(initial_json), _state(final_json)
    except ValueError as exc:
        return _failed(str(exc))
    except MemoryError:
        return _out_of_memory()
    namespace: dict[str, Any] = {"__name__": "envscaler_check", "__builtins__": builtins,
                                 "initial_state": initial_state}
    try:
        exec(code, namespace)  # noqa: S102 - the purpose
        check_func = namespace.get("check_func")
        if not callable(check_func):
            return _failed("the source does not define a function check_func(final_state)")
        verdict = check_func(final_state)
    except MemoryError:
        return _out_of_memory()
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: the check failed
        return _failed(describe_exception(exc))
    if type(verdict) is not bool:
        return _failed(f"check_func returned {type(verdict).__name__}, not bool")
    return {"passed": verdict, "error": None, "exhausted": None}


def _state(text: str) -> dict[str, Any]:
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"the state is not JSON: {exc}") from None
    if not isinstance(state, dict):
        raise ValueError(f"the state is a JSON {type(state).__name__}, not an object")
    return state


def _failed(error: str, exhausted: str | None = None) -> dict[str, Any]:
    return {"passed": False, "error": error, "exhausted": exhausted}


def _out_of_memory() -> dict[str, Any]:
    """Small, from constants: called while the exception's traceback still holds the memory the
    check took."""
    return _failed("check ran out of memory (MemoryError at its address-space limit)", MEMORY)


class Checker:
    def __init__(self, contained: bool) -> None:
        self.contained = contained
        self._clear()  # nothing but the checker from the start
        gc.freeze()  # what exists now is never scanned again: a child's collections copy no pages

    def check(self, checks: list[Any], initial_state: str, final_state: str,
              budget: Budget) -> list[dict[str, Any]]:
        """Verdicts ``{"passed", "error", "exhausted"}`` in the order of ``checks``, or
        ``Starved``.

        A source that does not compile fails at once. A first pass runs every other check in one
        child (a fork per validation, not per check), each on fresh copies of the states and
        under its own CPU budget; its bool answers are kept. Every other check (it raised, ran
        out of budget, or was never reached) is judged again alone, in a child of its own."""
        _validate(checks, budget)
        verdicts, codes = _compile_all(checks)
        try:
            first = self._first_pass(list(codes.values()), initial_state, final_state, budget)
            for index, verdict in zip(codes, first, strict=True):
                verdicts[index] = verdict
            again = [index for index in codes if verdicts[index] is None]
            if again:
                self._clear()  # what the first pass started holds no process slot any more
            ooms = contain.oom_kills()
            children = [self._fork([codes[index]], initial_state, final_state, budget)
                        for index in again]
            _collect(children, budget)
            oom_killed = _rose(ooms, contain.oom_kills())
        finally:
            self._clear()  # whatever the checks started dies with their validation
        starved = sum(child.starved for child in children)
        if starved:
            raise OperationError("Starved", f"{starved} of {len(children)} checks got too little "
                                 f"CPU within {budget.wall_seconds:g} s; the machine is busy")
        for index, child in zip(again, children, strict=True):
            verdicts[index] = _verdict(child, budget, oom_killed)
        return verdicts  # type: ignore[return-value] - every None was replaced

    def _first_pass(self, checks: list[types.CodeType], initial_state: str, final_state: str,
                    budget: Budget) -> list[dict[str, Any] | None]:
        if len(checks) < 2:
            return [None] * len(checks)
        child = self._fork(checks, initial_state, final_state, budget)
        _collect([child], budget)
        return _answers(child, len(checks))

    def _clear(self) -> None:
        if self.contained:
            contain.kill_all_others()

    def _fork(self, codes: list[types.CodeType], initial_state: str, final_state: str,
              budget: Budget) -> _Child:
        read_fd, write_fd = os.pipe()
        memory = contain.address_space_bytes() + budget.memory_bytes
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            status = 1
            try:
                _become_check(parent, write_fd, budget, len(codes), memory, self.contained)
                if len(codes) == 1:
                    _say(evaluate(codes[0], initial_state, final_state))
                else:
                    _judge_in_turn(codes, initial_state, final_state, budget.cpu_seconds)
                status = 0
            finally:
                os._exit(status)
        os.close(write_fd)
        try:
            os.setpgid(pid, pid)  # also done by the child: whichever runs first
        except OSError:
            pass  # already exited, or already its own group
        os.set_blocking(read_fd, False)
        return _Child(pid, read_fd)


def _judge_in_turn(codes: list[types.CodeType], initial_state: str, final_state: str,
                   cpu_seconds: float) -> None:
    """The first pass, in its child: one verdict line per check, each check on fresh copies of
    the states, with the builtins as they were, and stopped by a profiling timer at its CPU
    budget (the child's ``RLIMIT_CPU`` covers the sum, for code the timer cannot interrupt) or by
    a real-time one a second later (a check that waits is judged in the second run, which tells
    waiting from starving; the first pass does not hold the others up meanwhile)."""
    shared = vars(builtins)  # looked up once: while it is being restored, it is empty
    builtins_before = dict(shared)

    def stop(signum: int, _frame: Any) -> None:
        raise _OverBudget("check exceeded its CPU time budget" if signum == signal.SIGPROF
                          else "check is slow: judged again alone")

    for signum in (signal.SIGPROF, signal.SIGALRM):
        signal.signal(signum, stop)
    for code in codes:
        signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
        signal.setitimer(signal.ITIMER_REAL, cpu_seconds + FIRST_PASS_GRACE_SECONDS)
        verdict = evaluate(code, initial_state, final_state)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        shared.clear()
        shared.update(builtins_before)
        _say(verdict)


class _OverBudget(Exception):
    pass


def _say(verdict: dict[str, Any]) -> None:
    _write_all(VERDICT_FD, protocol.dump_body(verdict) + b"\n")


def _answers(child: _Child, count: int) -> list[dict[str, Any] | None]:
    """The first pass's verdicts that are bool answers (None for an error, a missing or a
    garbled line)."""
    lines = bytes(child.verdict).split(b"\n")
    verdicts: list[dict[str, Any] | None] = []
    for line in lines[:count] if not child.overflowed else []:
        verdict = _parse(line)
        verdicts.append(verdict if verdict is not None and verdict["error"] is None else None)
    return verdicts + [None] * (count - len(verdicts))


def _compile_all(checks: list[str]) -> tuple[list[dict[str, Any] | None],
                                              dict[int, types.CodeType]]:
    """The failed verdict of each source that does not compile (None for the others), and the
    code of the others by index."""
    verdicts: list[dict[str, Any] | None] = []
    codes = {}
    for index, source in enumerate(checks):
        try:
            codes[index] = compiled(source)
            verdicts.append(None)
        except Exception as exc:  # noqa: BLE001 - SyntaxError, ValueError (NUL), RecursionError
            verdicts.append(_failed(describe_exception(exc)))
    return verdicts, codes


def _validate(checks: list[Any], budget: Budget) -> None:
    if not all(isinstance(source, str) for source in checks):
        raise OperationError("BadRequest", "checks must be a list of strings")
    if len(checks) > MAX_CHECKS:
        raise OperationError("BadRequest", f"at most {MAX_CHECKS} checks per request")
    if not (0 < budget.cpu_seconds <= budget.wall_seconds <= 3600):
        raise OperationError("BadRequest", "need 0 < cpu_seconds <= wall_seconds <= 3600")
    if budget.memory_bytes <= 0:
        raise OperationError("BadRequest", "memory_bytes must be positive")


def _become_check(parent_pid: int, write_fd: int, budget: Budget, checks: int,
                  memory_bytes: int, contained: bool) -> None:
    """In the child: dies with the checker, its own process group, only the verdict pipe open,
    and its limits (CPU: the budget of each of its ``checks``)."""
    if not contained:  # in a container, the checker's death ends its init, and every process
        contain.die_with_parent(parent_pid)
    gc.disable()  # a check is short-lived: collecting would only copy the parent's pages
    os.setpgid(0, 0)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    os.dup2(write_fd, VERDICT_FD)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(VERDICT_FD + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    cpu = max(1, math.ceil(budget.cpu_seconds * checks))
    for limit, value in ((resource.RLIMIT_CPU, (cpu, cpu + 1)),
                         (resource.RLIMIT_AS, (memory_bytes, memory_bytes)),
                         (resource.RLIMIT_NOFILE, (_CHILD_OPEN_FILES, _CHILD_OPEN_FILES)),
                         (resource.RLIMIT_FSIZE, (0, 0)), (resource.RLIMIT_CORE, (0, 0))):
        resource.setrlimit(limit, value)
    contain.drop_privileges()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _collect(children: list[_Child], budget: Budget) -> None:
    """Read every verdict until its child has ended (its pipe closed, or it exited while
    something it started holds the pipe open) or the wall deadline passes; then kill each
    child's group and reap it with its CPU time."""
    if not children:
        return
    deadline = time.monotonic() + budget.wall_seconds
    with selectors.DefaultSelector() as selector:
        for child in children:
            selector.register(child.fd, selectors.EVENT_READ, child)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for key, _ in selector.select(min(remaining, EXIT_POLL_SECONDS)):
                if not _read(key.data):
                    selector.unregister(key.fd)
            for key in list(selector.get_map().values()):
                if _reap(key.data, os.WNOHANG):
                    _read(key.data)  # what it wrote before it exited
                    selector.unregister(key.fd)
        for key in list(selector.get_map().values()):  # still running at the deadline
            _judge_overdue(key.data, budget)
    for child in children:
        contain.kill_group(child.pid)  # with whatever it left in its group
        if child.status is None:
            _reap(child, 0)
        os.close(child.fd)


def _reap(child: _Child, flags: int) -> bool:
    """Collect the child's exit status and CPU time; False while it still runs (``WNOHANG``)."""
    if child.status is not None:
        return True
    pid, status, usage = os.wait4(child.pid, flags)
    if pid == 0:
        return False
    child.status, child.cpu_seconds = status, usage.ru_utime + usage.ru_stime
    return True


def _read(child: _Child) -> bool:
    """Take what the pipe holds; False once the child closed it (or said too much)."""
    try:
        chunk = os.read(child.fd, _READ_CHUNK)
    except BlockingIOError:
        return True
    if not chunk:
        return False
    child.verdict += chunk
    child.overflowed = len(child.verdict) > MAX_VERDICT_BYTES
    return not child.overflowed


def _judge_overdue(child: _Child, budget: Budget) -> None:
    """A child past the wall deadline: starved if it spent most of its time waiting for a CPU,
    otherwise blocked (it slept or waited on something that never came)."""
    timing = contain.schedstat(child.pid)
    if timing is None:  # no scheduler statistics (gVisor): it wants a CPU now, or it sleeps
        child.starved = contain.runnable(child.pid)
    else:  # starved: runnable (waiting for a CPU) for nearly all the time it did not run
        running, waiting = timing
        idle = max(budget.wall_seconds - running, 1e-9)
        child.starved = waiting / idle > STARVED_SHARE and running < budget.cpu_seconds
    child.blocked = not child.starved


def _rose(before: int | None, after: int | None) -> bool:
    return before is not None and after is not None and after > before


def _verdict(child: _Child, budget: Budget, oom_killed: bool) -> dict[str, Any]:
    """The verdict of a check judged alone. ``oom_killed``: the kernel's OOM killer ended some
    process of the checker's container meanwhile, so a check killed by ``SIGKILL`` (the checker
    sends it only to children past their deadline, judged as blocked or starved) ran out of
    memory."""
    if child.cpu_seconds > budget.cpu_seconds or _killed_by(child, signal.SIGXCPU):
        return _failed(f"check exceeded its CPU time budget of {budget.cpu_seconds:g} s", TIME)
    if child.blocked:
        return _failed(f"check blocked for {budget.wall_seconds:g} s without finishing "
                       "(it waited, not computed)", TIME)
    if oom_killed and _killed_by(child, signal.SIGKILL):
        return _failed("check was killed by the kernel: its checker sandbox ran out of memory",
                       MEMORY)
    if child.overflowed:
        return _failed(f"check wrote more than {MAX_VERDICT_BYTES} bytes of verdict")
    verdict = _parse(bytes(child.verdict).rstrip(b"\n"))
    if verdict is None:
        return _failed(f"check ended ({_describe_status(child.status)}) without a verdict")
    return verdict


def _parse(text: bytes) -> dict[str, Any] | None:
    """A verdict line, or None when it is not exactly one."""
    try:
        verdict = json.loads(text)
    except ValueError:
        return None
    if (not isinstance(verdict, dict) or type(verdict.get("passed")) is not bool
            or not isinstance(verdict.get("error"), (str, type(None)))
            or verdict.get("exhausted") not in (TIME, MEMORY, None)):
        return None
    return {"passed": verdict["passed"], "error": verdict["error"],
            "exhausted": verdict.get("exhausted")}


def _killed_by(child: _Child, signum: int) -> bool:
    return (child.status is not None and os.WIFSIGNALED(child.status)
            and os.WTERMSIG(child.status) == signum)


def _describe_status(status: int | None) -> str:
    if status is None:
        return "unknown status"
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.WEXITSTATUS(status)}"


class CheckerServer(protocol.ListeningServer):
    """One connection at a time, one validation at a time: a checker holds no state between
    requests, and the gateway keeps a pool of checkers for concurrency."""

    def __init__(self, listening: socket.socket, checker: Checker, secret: bytes | None) -> None:
        self.checker = checker
        super().__init__(listening, secret)

    def dispatch(self, request: Any) -> dict[str, Any]:
        try:
            op, fields = parse_request(request, FIELDS)
            if op == "ping":
                return protocol.ok({"pid": os.getpid(), "role": "checker"})
            budget = Budget(float(fields["cpu_seconds"]), float(fields["wall_seconds"]),
                            fields["memory_bytes"])
            return protocol.ok(self.checker.check(fields["checks"], fields["initial_state"],
                                                  fields["final_state"], budget))
        except OperationError as exc:
            return protocol.error(exc.kind, exc.message)
        except Exception as exc:  # noqa: BLE001 - e.g. fork failed: say so, keep serving
            return protocol.error("RuntimeError", describe_exception(exc))
