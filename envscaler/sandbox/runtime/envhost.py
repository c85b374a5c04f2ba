"""Holds one environment instance and performs the runtime's operations on it.

EnvScaler semantics (ENVSCALER.md §2-§3): the source is executed into a fresh module, the class
is built with ``cls(init_config)`` (or ``cls()`` when its constructor takes no positional
argument), then every top-level key of ``init_config`` is set as an attribute; the state is the
instance's public attributes. Unlike EnvScaler, only the advertised tools are callable, arguments
are bound before anything runs, and a tool's exception is a result, not the end of the session.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import gc
import hashlib
import inspect
import json
import pickle
import random
import sys
import traceback
import types
from typing import Any

from envscaler.sandbox.runtime import mergepatch
from envscaler.sandbox.runtime.determinism import DEFAULT_START, Determinism, parse_instant
from envscaler.sandbox.runtime.jsonsafe import NotData, to_json_safe, to_json_text
from envscaler.sandbox.runtime.protocol import JSONText, OperationError, describe_exception, dumps

ENV_FILENAME = "env.py"
# Environment code compiled once, before any of it ran, by the keeper's compiler child
# (``keeper.precompile``), by the sha256 of its source: every runtime forked afterwards finds it.
COMPILED: dict[str, types.CodeType] = {}


def source_digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def compile_source(source: str) -> types.CodeType:
    """``source`` compiled as an environment module (``SyntaxError`` and the like propagate)."""
    return compile(source, ENV_FILENAME, "exec")
MODULE_NAME = "envscaler_env"
DEFAULT_MAX_RESULT_BYTES = 1_048_576
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
               inspect.Parameter.VAR_POSITIONAL)
_MISSING = object()


@dataclasses.dataclass(frozen=True)
class _Recipe:
    """Everything needed to build the environment again, for ``reset``: the module is executed
    anew each time, so that nothing a session did to module globals or class attributes reaches
    the next episode (a reset is then as good as a fresh sandbox)."""

    code: types.CodeType
    source_lines: list[str]
    class_name: str
    tool_names: list[str]
    init_config: dict[str, Any] | str  # an object, or its JSON text (parsed anew per build)
    init_patch: dict[str, Any] | None  # a JSON merge patch applied on top (mergepatch.py)
    seed: int
    start_ns: int
    max_result_bytes: int


@dataclasses.dataclass
class _Environment:
    recipe: _Recipe
    cls: type
    tools: dict[str, types.FunctionType]
    env_object: Any
    # The state right after instantiation: its public attributes until `EnvHost.settle` writes
    # them as JSON text (or keeps why they have no JSON form); never touched again after that.
    initial_state: dict[str, Any] | str | OperationError
    # Tool name -> signature of the bound method, computed on first call: it depends on the
    # function only, and computing it took a third of the runtime's time per call.
    signatures: dict[str, inspect.Signature] = dataclasses.field(default_factory=dict)


class EnvHost:
    def __init__(self, determinism: Determinism) -> None:
        self._determinism = determinism
        self._env: _Environment | None = None
        # Tool calls that ran since the last load or reset. ``ping`` reports it, so that a gateway
        # attaching to this sandbox can tell whether it ran a call its trajectory lacks.
        self.executed = 0

    @property
    def loaded(self) -> bool:
        return self._env is not None

    def load(self, source: str, class_name: str, tools: list[str],
             init_config: dict[str, Any] | str, seed: int,
             max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES, clock_start: str | None = None,
             init_patch: dict[str, Any] | None = None) -> dict[str, Any]:
        _require_strings("tools", tools)
        if max_result_bytes <= 0:
            raise OperationError("BadRequest", "max_result_bytes must be positive")
        start_ns = _parse_clock_start(clock_start)
        self._env = None
        source_lines = source.splitlines()
        try:
            code = COMPILED.get(source_digest(source)) or compile_source(source)
        except BaseException as exc:  # noqa: BLE001 - SyntaxError, or a compiler limit
            raise OperationError("LoadError", _describe_in_source(exc, source_lines)) from None
        recipe = _Recipe(code, source_lines, class_name, tools, init_config, init_patch, seed,
                         start_ns, max_result_bytes)
        self._env = self._build(recipe)
        return {"tools": list(self._env.tools)}

    def reset(self, init_config: dict[str, Any] | str | None = None, seed: int | None = None,
              clock_start: str | None = None,
              init_patch: dict[str, Any] | None = None) -> dict[str, Any]:
        """The environment built anew (module and instance); ``None`` keeps the previous value
        (a new ``init_config`` comes with its own ``init_patch``, none when absent). When it
        cannot be built the host is left unloaded rather than half reset."""
        recipe = self._loaded().recipe
        recipe = dataclasses.replace(
            recipe,
            init_config=recipe.init_config if init_config is None else init_config,
            init_patch=recipe.init_patch if init_config is None else init_patch,
            seed=recipe.seed if seed is None else seed,
            start_ns=recipe.start_ns if clock_start is None else _parse_clock_start(clock_start))
        self._env = None
        self._env = self._build(recipe)
        return {"tools": list(self._env.tools)}

    def call(self, name: str, arguments: dict[str, Any], executed: int | None = None) -> Any:
        """Run one advertised tool. Arguments are bound first, so a call that does not fit the
        signature leaves no trace at all (not even on the clock, which moves only when a tool
        runs). ``executed``: see `_expect`."""
        env = self._require()
        self._expect(executed)
        function = env.tools.get(name)
        if function is None:
            raise OperationError("ToolNotFound", f"{name!r} is not a tool of {env.cls.__name__}")
        method = types.MethodType(function, env.env_object)
        try:
            signature = env.signatures.get(name)
            if signature is None:
                signature = env.signatures[name] = inspect.signature(method)
            signature.bind(**arguments)
        except TypeError as exc:
            raise OperationError("ArgumentError", f"{name}: {exc}") from None
        self._determinism.clock.advance_call()
        self.executed += 1
        try:
            result = method(**arguments)
        except BaseException as exc:  # noqa: BLE001 - env code's SystemExit is a tool error too
            raise OperationError("ToolException",
                                 _describe_in_source(exc, env.recipe.source_lines)) from None
        return _bounded_result(name, result, env.recipe.max_result_bytes)

    def state(self, executed: int | None = None) -> JSONText:
        env = self._require()
        self._expect(executed)
        return JSONText(_served_text(env.env_object))

    def snapshot(self, executed: int | None = None) -> dict[str, Any]:
        """The state right after the load or reset and the state now, as JSON texts: what a
        checker judges. Texts, so that nothing on their way parses them but each check."""
        env = self._require()
        self._expect(executed)
        if isinstance(env.initial_state, OperationError):
            raise env.initial_state
        return {"initial": env.initial_state, "final": _served_text(env.env_object)}

    def export(self, executed: int | None = None) -> dict[str, Any]:
        """The session's point as one opaque text, for `import_point` in another sandbox loaded
        with the same recipe (a fork): the instance, the module's globals, the generators and
        the clock, pickled. Pickled here and unpickled only in a sandbox of the same
        environment; the gateway never reads it. ``state_sha256`` lets the importer's answer be
        compared. ``NotExportable`` when the instance holds what pickle cannot take (a lock, a
        generator): the gateway then rebuilds the fork by replay."""
        env = self._require()
        self._expect(executed)
        if isinstance(env.initial_state, OperationError):
            raise env.initial_state
        point = {"env": env.env_object, "globals": _module_globals(),
                 "random": random.getstate(), "determinism": self._determinism.export(),
                 "executed": self.executed, "initial": env.initial_state}
        try:
            blob = pickle.dumps(point, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - whatever env code's objects raise
            raise OperationError("NotExportable", f"the state of {env.cls.__name__} cannot be "
                                 f"copied: {describe_exception(exc)}") from None
        return {"point": base64.b64encode(blob).decode("ascii"),
                "state_sha256": _state_digest(env.env_object)}

    def import_point(self, point: str) -> dict[str, Any]:
        """Continue from an exported point: the environment must be loaded with the recipe of
        the exporter's epoch (its module and class), whose objects the point refers to."""
        env = self._require()
        try:
            restored = pickle.loads(base64.b64decode(point, validate=True))  # noqa: S301
            globals_ = restored["globals"]
            env_object, initial = restored["env"], restored["initial"]
        except Exception as exc:  # noqa: BLE001 - a point of another environment, or damaged
            raise OperationError("BadPoint", f"the point cannot be restored here: "
                                 f"{describe_exception(exc)}") from None
        if not isinstance(env_object, env.cls) or not isinstance(initial, str):
            raise OperationError("BadPoint", "the point is of another environment")
        sys.modules[MODULE_NAME].__dict__.update(globals_)
        random.setstate(restored["random"])
        self._determinism.restore(restored["determinism"])
        self.executed = restored["executed"]
        env.env_object, env.initial_state = env_object, initial
        return {"state_sha256": _state_digest(env_object), "executed": self.executed}

    @property
    def unsettled(self) -> bool:
        return self._env is not None and isinstance(self._env.initial_state, dict)

    def settle(self) -> None:
        """Write the initial state's JSON text, if the last build has not yet. A build leaves it
        for later, so that a load or reset answers without waiting for it (a third of a
        megabyte-sized load): the server calls this once that answer is sent, and every other
        operation first, so the text is always of the state before any call."""
        if not self.unsettled:
            return
        env = self._env
        try:
            env.initial_state = to_json_text(env.initial_state, root="initial_state")
        except NotData as exc:
            env.initial_state = OperationError("StateNotData", str(exc))
        except Exception as exc:  # noqa: BLE001 - env code's __getstate__ or __repr__ raised
            env.initial_state = OperationError(
                "StateNotData", f"reading the initial state of {env.cls.__name__} failed: "
                f"{describe_exception(exc)}")

    def _expect(self, executed: int | None) -> None:
        """Refuse to act when the caller expects another number of executed calls than this
        sandbox ran: someone else ran a call here that the caller's record lacks (a gateway that
        died between running a call and recording it, while another gateway held this sandbox
        too), so this state is not the recorded one."""
        if executed is not None and executed != self.executed:
            raise OperationError("Diverged", f"this sandbox ran {self.executed} calls since its "
                                 f"load or reset; the caller recorded {executed}")

    def _require(self) -> _Environment:
        """The loaded environment, settled: ready for an operation that may read or change it."""
        env = self._loaded()
        self.settle()
        return env

    def _loaded(self) -> _Environment:
        if self._env is None:
            raise OperationError("NotLoaded", "no environment is loaded; send load first")
        return self._env

    def _build(self, recipe: _Recipe) -> _Environment:
        # Seeded first: module-level code sees seeded randomness and the clock's start too.
        self._determinism.reseed(recipe.seed, recipe.start_ns)
        self.executed = 0
        cls = _find_class(_execute(recipe.code, recipe.source_lines), recipe.class_name)
        tools = _tool_functions(cls, recipe.tool_names)
        env_object = _instantiate(cls, recipe)
        try:
            attributes = _public(env_object)
        except Exception as exc:  # noqa: BLE001 - e.g. a class without __dict__
            raise OperationError("LoadError", f"reading the state of {cls.__name__} "
                                 f"failed: {describe_exception(exc)}") from None
        return _Environment(recipe, cls, tools, env_object, attributes)


def _execute(code: types.CodeType, source_lines: list[str]) -> types.ModuleType:
    """Run the code as module ``envscaler_env``. It stays in ``sys.modules`` (replaced by the
    next load) because dataclasses, TypedDict and ``typing.get_type_hints`` look classes' modules
    up there, at definition time and later."""
    module = types.ModuleType(MODULE_NAME)
    module.__file__ = ENV_FILENAME
    sys.modules[MODULE_NAME] = module
    try:
        exec(code, module.__dict__)  # noqa: S102 - the purpose
    except BaseException as exc:  # noqa: BLE001 - whatever module-level code raises
        del sys.modules[MODULE_NAME]
        raise OperationError("LoadError", _describe_in_source(exc, source_lines)) from None
    return module


def _find_class(module: types.ModuleType, class_name: str) -> type:
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        found = "is not defined" if cls is None else f"is a {type(cls).__name__}, not a class"
        raise OperationError("LoadError", f"{class_name!r} {found} in the source")
    return cls


def _tool_functions(cls: type, tools: list[str]) -> dict[str, types.FunctionType]:
    """The advertised tools, each a public plain function defined on the class (or a base).

    Looked up on the class, never on an instance, so init_config keys, properties and class
    attributes that happen to share a tool's name cannot stand in for it."""
    functions = {}
    for name in tools:
        if name.startswith("_"):
            raise OperationError("LoadError", f"tool {name!r} is private: names starting with _ "
                                 "are not tools")
        attribute = _class_attribute(cls, name)
        if attribute is _MISSING:
            raise OperationError("LoadError", f"tool {name!r} is not defined by {cls.__name__}")
        if not inspect.isfunction(attribute):
            raise OperationError("LoadError", f"tool {name!r} of {cls.__name__} is a "
                                 f"{type(attribute).__name__}, not a method")
        functions[name] = attribute
    return functions


def _class_attribute(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return _MISSING


def _instantiate(cls: type, recipe: _Recipe) -> Any:
    """As EnvScaler: the same config object goes to the constructor and into the attributes."""
    init_config = _fresh_config(recipe)
    try:
        env_object = cls(init_config) if _takes_positional(cls) else cls()
        for key, value in init_config.items():
            setattr(env_object, key, value)
    except BaseException as exc:  # noqa: BLE001 - whatever the constructor raises
        raise OperationError("LoadError", f"instantiating {cls.__name__} raised "
                             f"{_describe_in_source(exc, recipe.source_lines)}") from None
    return env_object


def _fresh_config(recipe: _Recipe) -> dict[str, Any]:
    """A copy of the initial configuration that nothing else holds. From its JSON text when the
    gateway sent one: parsing is the cheaper copy of a large database (a third less than
    ``deepcopy``), and no object was built for the message itself."""
    if isinstance(recipe.init_config, str):
        try:
            config = _parse_acyclic(recipe.init_config)
        except ValueError as exc:
            raise OperationError("LoadError", f"init_config is not JSON: {exc}") from None
    else:
        config = copy.deepcopy(recipe.init_config)
    if recipe.init_patch is not None:
        config = mergepatch.apply(config, recipe.init_patch)
    if not isinstance(config, dict):
        raise OperationError("LoadError", f"init_config is a {type(config).__name__}, not an "
                             "object")
    return config


def _parse_acyclic(text: str) -> Any:
    """``json.loads`` with the cycle collector paused: parsing makes no cycles to collect, and a
    database's hundreds of thousands of new objects would otherwise set off collections that
    scan them all (up to half again the parse's time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return json.loads(text)
    finally:
        if enabled:
            gc.enable()


def _takes_positional(cls: type) -> bool:
    try:
        parameters = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):  # no introspectable signature: pass init_config as EnvScaler
        return True
    return any(parameter.kind in _POSITIONAL for parameter in parameters)


def _public(env_object: Any) -> dict[str, Any]:
    """The state: the object's public attributes."""
    return {name: value for name, value in vars(env_object).items() if not name.startswith("_")}


def _served_text(env_object: Any) -> str:
    """The state after calls as JSON text (the encoder's fast way for plain data); one that is
    not data (a cycle, colliding keys) is ``StateNotData``."""
    try:
        return to_json_text(_public(env_object), root="state")
    except NotData as exc:
        raise OperationError("StateNotData", str(exc)) from None


def _module_globals() -> dict[str, Any]:
    """The environment module's own globals (not its functions and classes, which the importer's
    load defines again, nor what the module machinery put there)."""
    module = sys.modules[MODULE_NAME]
    return {name: value for name, value in vars(module).items()
            if not name.startswith("__") and not isinstance(value, (type, types.FunctionType,
                                                                    types.ModuleType))}


def _state_digest(env_object: Any) -> str:
    return hashlib.sha256(_served_text(env_object).encode("utf-8", "surrogatepass")).hexdigest()


def _bounded_result(name: str, result: Any, max_bytes: int) -> Any:
    try:
        safe = to_json_safe(result, root="result")
        size = len(dumps(safe).encode())
    except NotData as exc:
        raise OperationError("ToolException", f"{name} returned a value that is not JSON data: "
                             f"{exc}") from None
    except MemoryError:
        raise OperationError("ResultTooLarge", f"{name} returned a result too large to convert "
                             "to JSON") from None
    if size > max_bytes:
        raise OperationError("ResultTooLarge", f"{name} returned {size} bytes of JSON; the limit "
                             f"is {max_bytes} bytes")
    return safe


def _describe_in_source(exc: BaseException, source_lines: list[str]) -> str:
    """``describe_exception`` plus the innermost line of the environment source that was running."""
    description = describe_exception(exc)
    line_numbers = [line for frame, line in traceback.walk_tb(exc.__traceback__)
                    if frame.f_code.co_filename == ENV_FILENAME and line]
    if not line_numbers or line_numbers[-1] > len(source_lines):
        return description
    line = line_numbers[-1]
    return f"{description} ({ENV_FILENAME} line {line}: {source_lines[line - 1].strip()})"


def _parse_clock_start(clock_start: str | None) -> int:
    try:
        return parse_instant(DEFAULT_START if clock_start is None else clock_start)
    except ValueError:
        raise OperationError("BadRequest", f"clock_start {clock_start!r} is not an ISO 8601 "
                             "date-time") from None


def _require_strings(field: str, values: list[Any]) -> None:
    if not all(isinstance(value, str) for value in values):
        raise OperationError("BadRequest", f"{field} must be a list of strings")
