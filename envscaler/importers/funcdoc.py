"""A wrapper method of an environment class, written from a benchmark's function doc (OpenAI-style
``name``, ``description``, ``parameters``) and the benchmark's own method: typed from the doc
(defaults from the method's signature), described in a Google-style docstring, so that the
schema derived from the environment's source is the doc's. Shared by the importers of benchmarks
whose classes come with such docs (BFCL, ACEBench)."""

from __future__ import annotations

import ast

_TYPES = {"string": "str", "integer": "int", "float": "float", "number": "float",
          "boolean": "bool", "dict": "dict", "object": "dict", "tuple": "list"}


class FuncDocError(ValueError):
    """A method the doc does not describe (it takes a parameter the doc lacks)."""


def documented_method(method: ast.FunctionDef, doc: dict, target: str,
                      via: str | None = None) -> tuple[str, list[str]]:
    """The wrapper method's source and the parameters it passes on; it returns
    ``{target}(name=name, ...)``, e.g. ``self.PantryAPI.use`` (``target`` is an expression), or
    with ``via`` ``{via}({target}, name=name, ...)`` (a helper that calls it and records what
    it answered)."""
    parameters = doc.get("parameters", {}).get("properties", {})
    defaults = _defaults(method)
    signature, passed, described = ["self"], [], []
    names = [arg.arg for arg in [*method.args.posonlyargs, *method.args.args][1:]]
    for name in names:
        if name not in parameters:
            if name not in defaults:
                raise FuncDocError(f"{target} takes {name}, which its doc lacks")
            continue
        spec = parameters[name]
        default = f" = {defaults[name]}" if name in defaults else ""
        signature.append(f"{name}: {_annotation(spec)}{default}")
        passed.append(f"{name}={name}")
        described.append(f"            {name}: {one_line(spec.get('description', ''))}")
    docstring = one_line(doc.get("description", method.name))
    if described:
        docstring += "\n\n        Args:\n" + "\n".join(described)
    call = (f"{via}({', '.join([target, *passed])})" if via is not None
            else f"{target}({', '.join(passed)})")
    text = (f"    def {method.name}({', '.join(signature)}):\n"
            f'        """{docstring}\n        """\n'
            f"        return {call}")
    return text, [name for name in names if name in parameters]


def _defaults(method: ast.FunctionDef) -> dict[str, str]:
    positional = [*method.args.posonlyargs, *method.args.args]
    pairs = zip(positional[len(positional) - len(method.args.defaults):], method.args.defaults,
                strict=True)
    return {arg.arg: ast.unparse(default) for arg, default in pairs}


def _annotation(spec: dict) -> str:
    kind = spec.get("type")
    if kind == "array":
        items = _TYPES.get((spec.get("items") or {}).get("type", ""))
        return f"list[{items}]" if items else "list"
    return _TYPES.get(kind or "", "object")


def one_line(text: str) -> str:
    """``text`` on one line, safe inside a triple-quoted docstring."""
    return " ".join(str(text).replace('"""', "'''").replace("\\", "\\\\").split())


__all__ = ["FuncDocError", "documented_method", "one_line"]
