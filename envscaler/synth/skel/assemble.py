"""Turning model-written code into one module: skeleton checks, method extraction, assembly.

Assembly is textual so the skeleton's comments (the constraint rules) survive: the imports of the
skeleton and of every method are hoisted to the top, de-duplicated and sorted; the methods are
indented into the class after ``__init__``, in operation order; the result must parse.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

from envscaler.synth.llm import ParseError
from envscaler.synth.parsing import python_reply

INDENT = "    "


@dataclass(frozen=True)
class Skeleton:
    code: str
    class_name: str
    attributes: list[str]


@dataclass(frozen=True)
class Method:
    name: str
    imports: list[str]  # import statements, one per line
    code: str  # the def, dedented, without imports


def _is_typed_dict(node: ast.ClassDef) -> bool:
    return any((isinstance(base, ast.Name) and base.id == "TypedDict") or
               (isinstance(base, ast.Attribute) and base.attr == "TypedDict") for base in node.bases)


def parse_skeleton(text: str) -> Skeleton:
    """The skeleton module of a reply: TypedDicts plus one class with only ``__init__``."""
    code = python_reply(text)
    module = ast.parse(code)
    classes = [node for node in module.body if isinstance(node, ast.ClassDef)]
    main = [node for node in classes if not _is_typed_dict(node)]
    if len(main) != 1:
        raise ParseError(f"expected exactly one class besides the TypedDicts, found {len(main)}")
    cls = main[0]
    methods = [node.name for node in cls.body if isinstance(node, (ast.FunctionDef,
                                                                    ast.AsyncFunctionDef))]
    if methods != ["__init__"]:
        raise ParseError(f"the class must define only __init__; it defines {', '.join(methods) or 'nothing'}")
    if not re.match(r"^[A-Z][A-Za-z0-9]*$", cls.name):
        raise ParseError(f"the class name {cls.name!r} is not CamelCase")
    init = cls.body[[isinstance(n, ast.FunctionDef) for n in cls.body].index(True)]
    attributes = sorted({target.attr for node in ast.walk(init)
                         for target in _targets(node)
                         if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                         and target.value.id == "self" and not target.attr.startswith("_")
                         and target.attr != "init_config"})
    if not attributes:
        raise ParseError("__init__ declares no state attributes (self.<name> = {})")
    return Skeleton(code=code, class_name=cls.name, attributes=attributes)


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, ast.AnnAssign):
        return [node.target]
    return []


def parse_method(text: str, name: str) -> Method:
    """The method ``name`` of a reply: one ``def`` (possibly inside a class), with its imports."""
    code = python_reply(text)
    module = ast.parse(code)
    imports = [ast.get_source_segment(code, node) or "" for node in module.body
               if isinstance(node, (ast.Import, ast.ImportFrom))]
    functions = [node for node in module.body if isinstance(node, ast.FunctionDef)]
    for node in module.body:
        if isinstance(node, ast.ClassDef):
            functions += [inner for inner in node.body if isinstance(inner, ast.FunctionDef)]
    matching = [node for node in functions if node.name == name]
    if not matching:
        found = ", ".join(node.name for node in functions) or "no function"
        raise ParseError(f"the code must define the method {name}; it defines {found}")
    if len(matching) > 1:
        raise ParseError(f"the method {name} is defined more than once")
    node = matching[0]
    params = [arg.arg for arg in node.args.posonlyargs + node.args.args]
    if not params or params[0] != "self":
        raise ParseError(f"{name} must take self as its first parameter")
    start = node.lineno if not node.decorator_list else node.decorator_list[0].lineno
    lines = code.splitlines()[start - 1: node.end_lineno]
    return Method(name=name, imports=imports, code=textwrap.dedent("\n".join(lines)) + "\n")


def assemble(skeleton: str, methods: list[Method]) -> str:
    """One module: hoisted imports, the skeleton's types and class, then the methods."""
    module = ast.parse(skeleton)
    lines = skeleton.splitlines()
    imports = [ast.get_source_segment(skeleton, node) or "" for node in module.body
               if isinstance(node, (ast.Import, ast.ImportFrom))]
    import_lines = {line for node in module.body if isinstance(node, (ast.Import, ast.ImportFrom))
                    for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)}
    for method in methods:
        imports += method.imports
    cls = next(node for node in module.body if isinstance(node, ast.ClassDef)
               and not _is_typed_dict(node))
    last = _class_last_line(module, cls, lines)
    head = [line for number, line in enumerate(lines[:last], start=1) if number not in import_lines]
    tail = [line for number, line in enumerate(lines[last:], start=last + 1)
            if number not in import_lines]
    method_text = "\n\n".join(textwrap.indent(method.code.rstrip("\n"), INDENT)
                              for method in methods)
    parts = [*hoist(imports), "", "", "\n".join(head).strip("\n"), "", method_text, "", "",
             "\n".join(tail).strip("\n")]
    source = "\n".join(parts)
    source = "\n".join(line.rstrip() for line in source.splitlines())
    source = re.sub(r"\n{4,}", "\n\n\n", source).strip("\n") + "\n"
    try:
        ast.parse(source)
    except SyntaxError as exc:
        raise ParseError(f"the assembled module does not parse: {exc.msg} (line {exc.lineno})") \
            from None
    return source


def _class_last_line(module: ast.Module, cls: ast.ClassDef, lines: list[str]) -> int:
    """The class's last line, counting indented comments after its last statement (the rules
    that the skeleton writes at the end of ``__init__``)."""
    assert cls.end_lineno is not None
    later = [node.lineno for node in module.body if node.lineno > cls.end_lineno]
    stop = min(later) - 1 if later else len(lines)
    last = cls.end_lineno
    for number in range(cls.end_lineno + 1, stop + 1):
        line = lines[number - 1]
        if line.strip() and not line[0].isspace():
            break
        if line.strip():
            last = number
    return last


def hoist(statements: list[str]) -> list[str]:
    """Import statements merged and sorted: ``__future__`` first, then ``import x``, then
    ``from x import a, b`` (one line per module)."""
    plain: set[str] = set()
    from_names: dict[str, set[str]] = {}
    for statement in statements:
        for node in ast.parse(statement).body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    plain.add(alias.name if alias.asname is None
                              else f"{alias.name} as {alias.asname}")
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                names = from_names.setdefault(module, set())
                for alias in node.names:
                    names.add(alias.name if alias.asname is None
                              else f"{alias.name} as {alias.asname}")
    lines = []
    if "__future__" in from_names:
        lines.append(f"from __future__ import {', '.join(sorted(from_names.pop('__future__')))}")
    lines += [f"import {name}" for name in sorted(plain)]
    lines += [f"from {module} import {', '.join(sorted(names))}"
              for module, names in sorted(from_names.items())]
    return lines
