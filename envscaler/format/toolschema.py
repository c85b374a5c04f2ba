"""Tool schemas (OpenAI function format) derived from an environment's source by AST only.

Generated code is untrusted, so it is never imported here: signatures, type hints and docstrings
are read from the syntax tree. Unlike the EnvScaler release, a parameter with a default is not
required, ``Literal`` gives an enum, TypedDict records become object schemas and the docstring's
``Args:`` entries become per-parameter descriptions.

Which methods are tools: every method defined directly in the class body whose name does not start
with ``_``. Properties (and their setters) are attributes, not tools. Static and class methods are
tools (the runtime calls ``getattr(instance, name)(**arguments)``, which works for both; ``cls`` is
skipped like ``self``). ``async def`` methods are not tools: the runtime calls synchronously and
would get a coroutine back. Methods inherited from base classes are not exposed: an environment is
one class.

Which parameters are exposed: everything callable by keyword. ``*args`` and ``**kwargs`` are not
exposed; without ``**kwargs`` the schema sets ``additionalProperties: false`` so an unknown argument
is rejected before it reaches the tool, with ``**kwargs`` extra arguments are allowed (a method with
only ``**kwargs`` therefore gets no properties and accepts any object). A public method with
positional-only parameters is an error, since the runtime could not pass them.

A parameter is required exactly when it has no default: ``Optional[T]`` (or ``T | None``) only
adds ``"null"`` to the type, and ``x: T = None`` is read as the implicit Optional it is. Defaults
that are JSON literals are recorded as ``default``. ``Any``, a missing annotation, and types JSON
cannot describe (classes other than the module's TypedDicts, enum members in ``Literal``) give the
empty schema: no constraint.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from typing import Any

from docstring_parser import ParseError, google, rest
from docstring_parser.google import GoogleParser, Section, SectionType

MAX_RECORD_DEPTH = 4  # TypedDicts nested deeper are plain objects: keeps schemas small and finite
_NULL: dict[str, Any] = {"type": "null"}
_SIMPLE_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
                 "NoneType": "null"}
_ARRAY_NAMES = {"list", "List", "Sequence", "MutableSequence", "Iterable", "Collection",
                "set", "Set", "MutableSet", "frozenset", "FrozenSet", "AbstractSet"}
_TUPLE_NAMES = {"tuple", "Tuple"}
_OBJECT_NAMES = {"dict", "Dict", "Mapping", "MutableMapping", "OrderedDict", "DefaultDict",
                 "defaultdict"}
_WRAPPER_NAMES = {"Annotated", "Required", "NotRequired", "ReadOnly", "Final", "ClassVar"}
_PROPERTY_DECORATORS = {"property", "cached_property"}
_PROPERTY_ACCESSORS = {"setter", "getter", "deleter"}
_ARGS_HEADER = re.compile(
    r"^(?P<indent>\s*)(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments):\s*$")
_SPHINX_FIELD = re.compile(r"^\s*:(param|parameter|arg|argument|type)\s+(?:[^:]*\s)?\*{0,2}\w+\s*:")
_GOOGLE = GoogleParser([*google.DEFAULT_SECTIONS, *(Section(title, "param", SectionType.MULTIPLE)
                                                     for title in ("Keyword Args",
                                                                   "Keyword Arguments"))])


class ToolSchemaError(ValueError):
    """The source cannot yield tool schemas; ``line`` points into the source when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def class_names(source: str) -> list[str]:
    """Names of the top-level classes of ``source``, in source order."""
    return [node.name for node in _parse(source).body if isinstance(node, ast.ClassDef)]


def public_tool_names(tools: list[dict[str, Any]]) -> list[str]:
    """The function names of a list of OpenAI function schemas, in order."""
    return [tool["function"]["name"] for tool in tools]


def derive_tools(source: str, class_name: str) -> list[dict[str, Any]]:
    """One OpenAI function schema per public method of ``class_name``, in source order."""
    module = _parse(source)
    cls = next((node for node in module.body
                if isinstance(node, ast.ClassDef) and node.name == class_name), None)
    if cls is None:
        raise ToolSchemaError(f"the source does not define class {class_name!r} at top level")
    types = _TypeMapper(_typed_dicts(module))
    methods: dict[str, ast.FunctionDef] = {}
    for node in cls.body:  # a redefinition replaces the earlier method, as in the class dict
        if isinstance(node, ast.FunctionDef) and _is_tool(node):
            methods[node.name] = node
    return [_tool_schema(method, types) for method in methods.values()]


def _parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise ToolSchemaError(f"the source does not parse: {exc.msg}", exc.lineno) from None


def _decorator_names(node: ast.FunctionDef) -> list[str]:
    names = []
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        names.append(_dotted_tail(target) or "")
    return names


def _is_tool(node: ast.FunctionDef) -> bool:
    if node.name.startswith("_"):
        return False
    names = _decorator_names(node)
    return not any(name in _PROPERTY_DECORATORS or name in _PROPERTY_ACCESSORS for name in names)


def _tool_schema(node: ast.FunctionDef, types: _TypeMapper) -> dict[str, Any]:
    description, arg_docs = _split_docstring(ast.get_docstring(node) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param, default in _keyword_params(node):
        schema = types.schema(param.annotation)
        value = _NOT_JSON if default is None else _literal_value(default)
        if value is None:  # ``x: str = None`` accepts null, as the implicit Optional it is
            schema = _union([schema, dict(_NULL)])
        if param.arg in arg_docs:
            schema["description"] = arg_docs[param.arg]
        if value is not _NOT_JSON:
            schema["default"] = value
        if default is None:
            required.append(param.arg)
        properties[param.arg] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    if node.args.kwarg is None:
        parameters["additionalProperties"] = False
    return {"type": "function",
            "function": {"name": node.name, "description": description, "parameters": parameters}}


def _keyword_params(node: ast.FunctionDef) -> list[tuple[ast.arg, ast.expr | None]]:
    """The parameters a caller passes by keyword, each with its default node (None: required)."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    pairs = list(zip(positional, [*defaults, *args.defaults], strict=True))
    if "staticmethod" not in _decorator_names(node):
        pairs = pairs[1:]  # self or cls
    skipped = len(positional) - len(pairs)
    if len(args.posonlyargs) > skipped:
        raise ToolSchemaError(f"tool {node.name!r} has positional-only parameters, which cannot be "
                              "passed by keyword", node.lineno)
    return [*pairs, *zip(args.kwonlyargs, args.kw_defaults, strict=True)]


class _NotJson:
    """Marks a value that is not a JSON literal (an expression, a set, bytes, ...)."""


_NOT_JSON = _NotJson()


def _literal_value(node: ast.expr) -> Any:
    """The JSON value of a literal expression, or _NOT_JSON when it is not one."""
    try:
        return _as_json(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_JSON


def _as_json(value: Any) -> Any:
    """``value`` as JSON (tuples become lists), or _NOT_JSON when JSON cannot represent it."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _NOT_JSON
    if isinstance(value, (list, tuple)):
        items = [_as_json(item) for item in value]
        return _NOT_JSON if any(item is _NOT_JSON for item in items) else items
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        entries = {key: _as_json(item) for key, item in value.items()}
        return _NOT_JSON if any(item is _NOT_JSON for item in entries.values()) else entries
    return _NOT_JSON


# --- docstrings ---------------------------------------------------------------------------------

def _split_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (docstring minus parameter documentation) and the per-parameter texts.

    Google style: an ``Args:`` block of ``name (type): text`` or ``name: text`` entries whose
    continuation lines are indented deeper. Sphinx style: ``:param [type] name: text`` fields;
    ``:type name:`` fields are dropped since the annotation already gives the type. The texts come
    from ``docstring_parser``; the description is cut here, since ``docstring_parser`` rewrites
    (or drops) the other sections (``Returns:``, ``Constraints:``) that it must keep verbatim.
    """
    return _description(doc), _parameter_texts(doc)


def _parameter_texts(doc: str) -> dict[str, str]:
    # The leading newline: docstring_parser takes a first line for the summary, even ``Args:``.
    for parser in (_GOOGLE.parse, rest.parse):
        try:
            params = parser("\n" + doc).params
        except ParseError:
            continue
        if params:
            return {param.arg_name.lstrip("*"): " ".join((param.description or "").split())
                    for param in params}
    return {}


def _description(doc: str) -> str:
    lines = doc.splitlines()
    kept: list[str] = []
    i = 0
    while i < len(lines):
        if header := _ARGS_HEADER.match(lines[i]):
            i = _block_end(lines, i + 1, len(header.group("indent")), through_blanks=True)
        elif _SPHINX_FIELD.match(lines[i]):
            i = _block_end(lines, i + 1, _indent(lines[i]), through_blanks=False)
        else:
            kept.append(lines[i])
            i += 1
    return re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in kept)).strip()


def _block_end(lines: list[str], i: int, indent: int, through_blanks: bool) -> int:
    """The index of the first line from ``i`` on that is not indented deeper than ``indent``
    (a blank line ends the block unless ``through_blanks``)."""
    while i < len(lines) and (_indent(lines[i]) > indent if lines[i].strip() else through_blanks):
        i += 1
    return i


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


# --- annotations --------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Field:
    annotation: ast.expr
    required: bool


class _TypeMapper:
    """Maps annotation nodes to JSON schemas, expanding the module's TypedDicts."""

    def __init__(self, typed_dicts: dict[str, ast.ClassDef]) -> None:
        self._typed_dicts = typed_dicts

    def schema(self, node: ast.expr | None,
               expanding: frozenset[str] = frozenset()) -> dict[str, Any]:
        """The JSON schema of an annotation; ``expanding`` holds TypedDicts being expanded."""
        if node is None:
            return {}
        if isinstance(node, ast.Constant):
            return self._constant(node.value, expanding)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return _union([self.schema(node.left, expanding), self.schema(node.right, expanding)])
        if isinstance(node, ast.Subscript):
            return self._subscript(node, expanding)
        name = _dotted_tail(node)
        if name in self._typed_dicts:
            return self._typed_dict(name, expanding)
        if name in _SIMPLE_TYPES:
            return {"type": _SIMPLE_TYPES[name]}
        if name in _ARRAY_NAMES or name in _TUPLE_NAMES:
            return {"type": "array"}
        if name in _OBJECT_NAMES:
            return {"type": "object"}
        return {}  # Any, object, or a type JSON cannot describe: no constraint

    def _constant(self, value: Any, expanding: frozenset[str]) -> dict[str, Any]:
        if value is None:
            return dict(_NULL)
        if isinstance(value, str):  # a forward reference or a postponed annotation
            try:
                return self.schema(ast.parse(value.strip(), mode="eval").body, expanding)
            except SyntaxError:
                return {}
        return {}

    def _subscript(self, node: ast.Subscript, expanding: frozenset[str]) -> dict[str, Any]:
        name = _dotted_tail(node.value)
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if name in _WRAPPER_NAMES:
            return self.schema(args[0], expanding)
        if name == "Optional":
            return _union([self.schema(args[0], expanding), dict(_NULL)])
        if name == "Union":
            return _union([self.schema(arg, expanding) for arg in args])
        if name == "Literal":
            return _literal(args)
        if name in _ARRAY_NAMES:
            return _array(self.schema(args[0], expanding))
        if name in _TUPLE_NAMES:
            return self._tuple(args, expanding)
        if name in _OBJECT_NAMES:
            values = self.schema(args[-1], expanding) if len(args) == 2 else {}
            return {"type": "object", **({"additionalProperties": values} if values else {})}
        return self.schema(node.value, expanding)

    def _tuple(self, args: list[ast.expr], expanding: frozenset[str]) -> dict[str, Any]:
        if len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is Ellipsis:
            return _array(self.schema(args[0], expanding))
        items = [self.schema(arg, expanding) for arg in args]
        size = len(items)
        return {"type": "array", "prefixItems": items, "minItems": size, "maxItems": size}

    def _typed_dict(self, name: str, expanding: frozenset[str]) -> dict[str, Any]:
        """A record's object schema; a recursive or too deeply nested one is a plain object."""
        if name in expanding or len(expanding) >= MAX_RECORD_DEPTH:
            return {"type": "object"}
        inner = expanding | {name}
        fields = self._fields(name)
        properties = {key: self.schema(field.annotation, inner) for key, field in fields.items()}
        return {"type": "object", "properties": properties,
                "required": [key for key, field in fields.items() if field.required]}

    def _fields(self, name: str, seen: frozenset[str] = frozenset()) -> dict[str, _Field]:
        """A TypedDict's fields, inherited ones first, with their required flag."""
        cls = self._typed_dicts[name]
        fields: dict[str, _Field] = {}
        for base in cls.bases:
            base_name = _dotted_tail(base)
            if base_name in self._typed_dicts and base_name not in seen:
                fields.update(self._fields(base_name, seen | {name}))
        total = next((kw.value.value for kw in cls.keywords
                      if kw.arg == "total" and isinstance(kw.value, ast.Constant)), True)
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                marker = _required_marker(stmt.annotation)
                required = bool(total) if marker is None else marker == "Required"
                fields[stmt.target.id] = _Field(stmt.annotation, required)
        return fields


def _typed_dicts(module: ast.Module) -> dict[str, ast.ClassDef]:
    """Top-level classes deriving from TypedDict, directly or through another one of them."""
    found: dict[str, ast.ClassDef] = {}
    for node in module.body:
        if isinstance(node, ast.ClassDef) and any(
                _dotted_tail(base) == "TypedDict" or _dotted_tail(base) in found
                for base in node.bases):
            found[node.name] = node
    return found


def _required_marker(node: ast.expr) -> str | None:
    """``Required`` or ``NotRequired`` when a TypedDict field annotation is wrapped in one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value.strip(), mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.Subscript):
        name = _dotted_tail(node.value)
        if name in ("Required", "NotRequired"):
            return name
        if name == "Annotated":
            first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else node.slice
            return _required_marker(first)
    return None


def _dotted_tail(node: ast.expr) -> str | None:
    """``List`` for ``List``, ``typing.List`` and ``t.List``; None for other expressions."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items} if items else {"type": "array"}


def _literal(args: list[ast.expr]) -> dict[str, Any]:
    values = [_literal_value(arg) for arg in args]
    types: list[str] = []
    for value in values:
        value_type = json_type(value)
        if value_type is None:
            return {}  # e.g. an enum member: not representable statically
        if value_type not in types:
            types.append(value_type)
    return {"type": types[0] if len(types) == 1 else types, "enum": values}


def json_type(value: Any) -> str | None:
    """The JSON Schema type of a Python value; None when JSON has no such value (e.g. a set)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object" if isinstance(value, dict) else None


def _union(members: list[dict[str, Any]]) -> dict[str, Any]:
    """``Union``/``|``: a type list when every member is a bare type, else ``anyOf``.

    A null member is folded into the other one (``"type": ["string", "null"]``, plus ``None`` in an
    enum) so ``Optional[list[str]]`` keeps its ``items``. An unconstrained member makes the whole
    union unconstrained.
    """
    flat: list[dict[str, Any]] = []
    for member in members:
        for part in member["anyOf"] if set(member) == {"anyOf"} else [member]:
            if part not in flat:
                flat.append(part)
    nullable = _NULL in flat
    rest = [member for member in flat if member != _NULL]
    if not rest:
        return dict(_NULL)
    if any("type" not in member and "anyOf" not in member for member in rest):
        return {}
    if len(rest) == 1:
        schema = dict(rest[0])
    elif all(set(member) == {"type"} for member in rest):
        schema = {"type": _merge_types(member["type"] for member in rest)}
    else:
        schema = {"anyOf": rest}
    return _with_null(schema) if nullable else schema


def _merge_types(types: Any) -> list[str]:
    merged: list[str] = []
    for entry in types:
        for json_type in entry if isinstance(entry, list) else [entry]:
            if json_type not in merged:
                merged.append(json_type)
    return merged


def _with_null(schema: dict[str, Any]) -> dict[str, Any]:
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], dict(_NULL)]}
    result = {**schema, "type": _merge_types([schema["type"], "null"])}
    if "enum" in schema and None not in schema["enum"]:
        result["enum"] = [*schema["enum"], None]
    return result
