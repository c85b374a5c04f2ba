"""What the importer reads from an ACEBench checkout the user provides, parsed without running
any of it: the agent category's questions and possible answers (``data_all/data_<language>/``,
one JSON object a line), the classes' modules each category's execution imports (its
``CLASS_FILE_PATH_MAPPING_<LANGUAGE>``) and the attributes ACEBench saves of each class as the
final state it scores (``SAVED_CLASS``)."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CATEGORIES = {"multi_step": "multi_step", "multi_turn": "multi_turn"}  # data name -> package
DATA = "data_all/data_{language}/data_agent_{category}.json"
ANSWERS = "data_all/data_{language}/possible_answer/data_agent_{category}.json"
UTILS = "model_inference/{package}/{package}_utils.py"
SAVED = "model_inference/apimodel_inference.py"


class CheckoutError(Exception):
    """The checkout lacks a file the import needs, or a file cannot be read."""


@dataclass(frozen=True)
class ClassSource:
    name: str
    module: str  # dotted, as ACEBench imports it
    node: ast.ClassDef

    def method(self, name: str, classes: dict[str, ClassSource]) -> ast.FunctionDef | None:
        """The method ``name`` of the class or of a base class of the checkout."""
        for item in self.node.body:
            if isinstance(item, ast.FunctionDef) and item.name == name:
                return item
        for base in self.node.bases:
            if isinstance(base, ast.Name) and base.id in classes and base.id != self.name:
                found = classes[base.id].method(name, classes)
                if found is not None:
                    return found
        return None


@dataclass
class Category:
    """One agent category: its questions (with their ``ground_truth`` and ``mile_stone``), the
    module sources by dotted name and the classes by name."""

    name: str
    questions: list[dict[str, Any]]
    sources: dict[str, str] = field(default_factory=dict)
    classes: dict[str, ClassSource] = field(default_factory=dict)


def read_category(root: Path, category: str, language: str = "en") -> Category:
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}: choose from {sorted(CATEGORIES)}")
    questions = _lines(root / DATA.format(language=language, category=category))
    answers = {answer.get("id"): answer for answer in
               _lines(root / ANSWERS.format(language=language, category=category))}
    for question in questions:
        answer = answers.get(question.get("id"), {})
        question["ground_truth"] = answer.get("ground_truth")
        question["mile_stone"] = answer.get("mile_stone")
    package = CATEGORIES[category]
    mapping = _assigned(root / UTILS.format(package=package),
                        f"CLASS_FILE_PATH_MAPPING_{language.upper()}")
    found = Category(category, questions)
    for class_name, module in mapping.items():
        _add_module(root, module, found)
        if class_name not in found.classes:
            raise CheckoutError(f"{module} does not define {class_name}")
    return found


def saved_attributes(root: Path) -> dict[str, list[str]]:
    """``SAVED_CLASS``: per class, the attributes ACEBench saves as its final state."""
    saved: dict[str, list[str]] = _assigned(root / SAVED, "SAVED_CLASS")
    return saved


def module_file(root: Path, module: str) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def _add_module(root: Path, module: str, category: Category) -> None:
    if module in category.sources:
        return
    path = module_file(root, module)
    text = _read(path)
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise CheckoutError(f"{path}:{exc.lineno}: does not parse: {exc.msg}") from None
    category.sources[module] = text
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            category.classes[node.name] = ClassSource(node.name, module, node)
        elif (isinstance(node, ast.ImportFrom) and node.module and not node.level
              and module_file(root, node.module).is_file()):
            _add_module(root, node.module, category)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckoutError(f"cannot read {path}: {exc}") from None


def _lines(path: Path) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(_read(path).splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise CheckoutError(f"{path}:{number}: not JSON: {exc.msg}") from None
    return records


def _assigned(path: Path, name: str) -> Any:
    try:
        tree = ast.parse(_read(path))
    except SyntaxError as exc:
        raise CheckoutError(f"{path}:{exc.lineno}: does not parse: {exc.msg}") from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == name for target in node.targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                break
    raise CheckoutError(f"{path} does not assign {name} a literal")


__all__ = ["CATEGORIES", "Category", "CheckoutError", "ClassSource", "module_file",
           "read_category", "saved_attributes"]
