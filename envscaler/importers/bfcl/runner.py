"""BFCL's own execution of ground truths, as BFCL's ``multi_turn_utils`` does it. This module runs
inside a throwaway sandbox-image container (``envscaler.importers.bfcl.container``), never beside the CLI:
it imports BFCL's classes, which are untrusted code. The host imports it only for `render_result`
and `error_text`, so that gateway results are rendered by the same code as BFCL's.

Per question: one instance of each involved class, loaded with
``_load_scenario(deepcopy(config), long_context=False)`` unless the class has no loader (BFCL's
stateless classes, e.g. MathAPI); each call text gets its method's instance put in front and is
evaluated; its result is rendered as BFCL renders it (`render_result`), an exception as
``Error during execution: ...``. Then the final state of each class: what BFCL's state checker
compares with ``==`` (the instance's public attributes; a nested object whose class has its own
``__eq__`` as the attributes that ``__eq__`` reads), as the data the gateway serves (the sandbox
image's ``to_json_safe``), so the two are comparable.

Usage: ``python3 -s -m bfcl_runner JOB OUT`` from the sandbox image's working directory (so its
runtime package imports). JOB is a JSON file: ``import_root`` (the folder to import BFCL's
package from), ``module_files`` (class name -> its module's file under that folder) and
``questions`` (each with BFCL's ``id``, ``involved_classes``, ``initial_config`` and
``ground_truth``). OUT receives ``{question id: {"results": [...], "state": {...}} or {"error":
"..."}}``. Each question's id is printed on its own line to stdout once done, for progress; what
BFCL's code prints goes to stderr.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import re
import sys
from enum import Enum
from numbers import Number
from pathlib import Path
from typing import Any

ERROR_PREFIX = "Error during execution: "
LOADER = "_load_scenario"
# BFCL refuses to evaluate calls of these names (the name after the instance, before "(")
REFUSED_CALLS = frozenset({"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"})
_CALLED_NAME = re.compile(r"\b([a-zA-Z_]\w*)\s*(?=\()")
_STANDARD = frozenset(sys.stdlib_module_names) | {"builtins"}


def render_result(value: Any) -> str:
    """A call's result as BFCL hands it to the model: a str as is, a dict as ``json.dumps`` (or
    ``str`` when it holds what JSON cannot), anything else as ``str``."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except Exception:  # noqa: BLE001 - BFCL falls back to str() on any failure
            return str(value)
    return str(value)


def error_text(message: str) -> str:
    """A call that raised, as BFCL renders it."""
    return ERROR_PREFIX + message


def execute(question: dict[str, Any], modules: dict[str, str]) -> dict[str, Any]:
    """Run one question's ground truth; ``modules``: class name -> dotted name of its module."""
    instances: dict[str, Any] = {}
    owners: dict[str, str] = {}
    for name in question["involved_classes"]:
        instance = getattr(importlib.import_module(modules[name]), name)()
        if hasattr(instance, LOADER):
            getattr(instance, LOADER)(copy.deepcopy(question["initial_config"].get(name, {})),
                                      long_context=False)
        instances[name] = instance
        for method, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
            if not method.startswith("_"):
                owners[method] = name
    namespace = {f"instance_{name}": instance for name, instance in instances.items()}
    results = [execute_call(text, owners, namespace)
               for turn in question["ground_truth"] for text in turn]
    state = {name: _public_attributes(instance, (id(instance),))
             for name, instance in instances.items()}
    return {"results": results, "state": state}


def execute_call(text: str, owners: dict[str, str], namespace: dict[str, Any]) -> str:
    """One call text evaluated on its instance, as BFCL does (its refusals included)."""
    located = _CALLED_NAME.sub(
        lambda match: (f"instance_{owners[match[1]]}.{match[1]}" if match[1] in owners
                       else match[1]), text)
    name = located.split("(")[0]
    if "." in name:
        name = name.split(".")[1]
    if name in REFUSED_CALLS:
        return error_text(f"Function call {name} is not allowed.")
    try:
        return render_result(eval(located, {}, namespace))
    except Exception as exc:  # noqa: BLE001 - BFCL renders every exception as a result
        return error_text(str(exc))


def compared(value: Any, ancestors: tuple[int, ...] = ()) -> Any:
    """``value`` as BFCL's ``==`` sees it: containers item by item (sets as sorted lists), an
    object of a class with its own ``__eq__`` as the attributes it reads, another object as its
    public attributes (leaving out a link back to an object it is inside of); anything else
    (numbers, standard-library objects) as it is, for ``to_json_safe`` to convert."""
    if isinstance(value, dict):
        return {key: compared(item, ancestors) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [compared(item, ancestors) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((compared(item, ancestors) for item in value), key=_json_text)
    attributes = getattr(value, "__dict__", None)
    if (not isinstance(attributes, dict) or isinstance(value, (Enum, Number))
            or type(value).__module__.split(".")[0] in _STANDARD):
        return value
    names = _equality_names(type(value))
    inner = (*ancestors, id(value))
    if names is None:
        return _public_attributes(value, inner)
    return {name: compared(attributes[name], inner) for name in names if name in attributes}


def _public_attributes(value: Any, ancestors: tuple[int, ...]) -> dict[str, Any]:
    return {name: compared(item, ancestors) for name, item in vars(value).items()
            if not name.startswith("_") and id(item) not in ancestors}


def _equality_names(kind: type) -> tuple[str, ...] | None:
    """The names a class's own Python ``__eq__`` uses (its attributes among them, which the
    caller keeps); None when it compares by identity."""
    code = getattr(kind.__eq__, "__code__", None)
    return None if kind.__eq__ is object.__eq__ or code is None else code.co_names


def _json_text(value: Any) -> str:
    from envscaler.sandbox.runtime.jsonsafe import to_json_text

    return to_json_text(value)


def _module_names(job: dict[str, Any]) -> dict[str, str]:
    """Each class's dotted module name, from its file's path under the import root."""
    root = Path(job["import_root"])
    return {name: ".".join(Path(path).relative_to(root).with_suffix("").parts)
            for name, path in job["module_files"].items()}


def main(job_file: str, out_file: str) -> None:
    from envscaler.sandbox.runtime.jsonsafe import to_json_safe

    job = json.loads(Path(job_file).read_text(encoding="utf-8"))
    sys.path.insert(0, job["import_root"])
    modules = _module_names(job)
    progress, sys.stdout = sys.stdout, sys.stderr
    executions: dict[str, Any] = {}
    for question in job["questions"]:
        try:
            executions[question["id"]] = to_json_safe(execute(question, modules))
        except Exception as exc:  # noqa: BLE001 - a class that does not load, a state not data
            executions[question["id"]] = {"error": f"{type(exc).__name__}: {exc}"}
        print(question["id"], file=progress, flush=True)
    Path(out_file).write_text(json.dumps(executions), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:])
