"""What the importer reads from a BFCL checkout the user provides, found by file name and parsed
without running any of it: the multi-turn question and ground-truth files of a category, the
function docs, and the classes' source files (read as text and inspected with ``ast``)."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

QUESTIONS = "BFCL_{version}_multi_turn_{category}.json"
VERSIONS = ("v4", "v3")  # BFCL renames its data files per release; the newest present is read
ANSWERS_DIR = "possible_answer"
FUNC_DOC_DIR = "multi_turn_func_doc"
SOURCE_DIR = "func_source_code"
LOADER = "_load_scenario"


class CheckoutError(Exception):
    """The checkout lacks a file the import needs, or a file cannot be read."""


@dataclass(frozen=True)
class ClassSource:
    """A class of ``module`` (a file of the source folder), found by name in its AST."""

    name: str
    module: str  # file stem, e.g. ``gorilla_file_system``
    node: ast.ClassDef

    @property
    def loads_scenario(self) -> bool:
        return any(isinstance(item, ast.FunctionDef) and item.name == LOADER
                   for item in self.node.body)

    def method(self, name: str) -> ast.FunctionDef | None:
        found = [item for item in self.node.body
                 if isinstance(item, ast.FunctionDef) and item.name == name]
        return found[-1] if found else None


@dataclass
class Checkout:
    """The files of one checkout (the folder ``root`` the user named): ``sources`` by module,
    ``classes`` by name, ``func_docs`` by module then function name."""

    root: Path
    data: Path
    source_dir: Path
    version: str
    sources: dict[str, str] = field(default_factory=dict)
    classes: dict[str, ClassSource] = field(default_factory=dict)
    func_docs: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def module_file(self, class_name: str) -> Path:
        """The file of the module that defines ``class_name`` (``KeyError`` when none does)."""
        return self.source_dir / f"{self.classes[class_name].module}.py"

    def import_root(self) -> Path:
        """The folder holding the package of the classes' modules (the nearest folder above the
        source folder without an ``__init__.py``, the checkout's root at the highest): on
        ``sys.path``, their sibling imports (by package path or relative) resolve as in BFCL.
        It is what BFCL's container mounts, so it never climbs above the checkout: a folder
        beside the checkout is none of BFCL's business."""
        folder = self.source_dir
        while folder != self.root and (folder / "__init__.py").is_file():
            folder = folder.parent
        return folder

    def questions(self, category: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The category's questions, and its ground truth by question id."""
        name = QUESTIONS.format(version=self.version, category=category)
        questions = _json_lines(self.data / name)
        answers = _json_lines(self.data / ANSWERS_DIR / name)
        return questions, {answer["id"]: answer.get("ground_truth") for answer in answers
                           if isinstance(answer, dict) and isinstance(answer.get("id"), str)}


def locate(root: Path) -> Checkout:
    """The checkout under ``root`` (a gorilla clone, or its ``berkeley-function-call-leaderboard``
    folder): the data folder is where the base questions are, the source folder where the
    classes are."""
    root = root.resolve()  # the root the import root stops at, whatever the path's spelling
    version, questions = _questions(root)
    sources = _find(root, SOURCE_DIR, directory=True)
    if not sources.resolve().is_relative_to(root.resolve()):
        raise CheckoutError(f"{sources} leads out of the checkout {root} (a link): refused")
    checkout = Checkout(root=root, data=questions.parent, source_dir=sources, version=version)
    for path in sorted(sources.glob("*.py")):
        text = _read(path)
        try:
            module = ast.parse(text, filename=str(path))
        except SyntaxError as exc:
            raise CheckoutError(f"{path} does not parse: {exc.msg} (line {exc.lineno})") from None
        checkout.sources[path.stem] = text
        for node in module.body:
            if isinstance(node, ast.ClassDef):
                checkout.classes.setdefault(node.name, ClassSource(node.name, path.stem, node))
    for path in sorted((checkout.data / FUNC_DOC_DIR).glob("*.json")):
        checkout.func_docs[path.stem] = {doc["name"]: doc for doc in _json_lines(path)
                                         if isinstance(doc, dict) and "name" in doc}
    if not checkout.func_docs:
        raise CheckoutError(f"no function docs in {checkout.data / FUNC_DOC_DIR}")
    return checkout


def _questions(root: Path) -> tuple[str, Path]:
    """The newest release's base question file, and that release's version."""
    for version in VERSIONS:
        name = QUESTIONS.format(version=version, category="base")
        try:
            return version, _find(root, name, exclude=ANSWERS_DIR)
        except CheckoutError as exc:
            missing = exc
    raise missing


def _find(root: Path, name: str, *, directory: bool = False, exclude: str = "") -> Path:
    if not root.is_dir():
        raise CheckoutError(f"{root} is not a folder")
    for path in sorted(root.rglob(name), key=lambda found: len(found.parts)):
        if path.is_dir() == directory and exclude not in path.parts:
            return path
    raise CheckoutError(f"{root} holds no {name}: is it a gorilla checkout?")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckoutError(f"cannot read {path}: {exc}") from None


def _json_lines(path: Path) -> list[Any]:
    return [record for _, record in numbered_json_lines(path)]


def numbered_json_lines(path: Path) -> list[tuple[int, Any]]:
    """The JSON value of each non-blank line of ``path`` (BFCL's data and result files), with its
    line number."""
    records = []
    for number, line in enumerate(_read(path).splitlines(), start=1):
        if line.strip():
            try:
                records.append((number, json.loads(line)))
            except ValueError as exc:
                raise CheckoutError(f"{path}:{number}: not JSON: {exc}") from None
    return records
