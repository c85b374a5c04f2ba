"""The gate corpus on disk is what its maker writes, and its labels cover every folder."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

CORPUS = REPO_ROOT / "tests" / "fixtures" / "gate_corpus"


def tree(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*"))
            if path.is_file() and path.relative_to(root).parts[0].startswith(
                ("good_", "broken_", "labels.json"))}


def test_the_committed_corpus_is_what_make_corpus_writes(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("make_corpus", CORPUS / "make_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "make_corpus", module)  # its dataclasses look it up
    spec.loader.exec_module(module)
    module.make(tmp_path)
    assert tree(tmp_path) == tree(CORPUS)


def test_every_folder_is_labelled_with_an_expectation_and_a_line() -> None:
    labels = json.loads((CORPUS / "labels.json").read_text())
    folders = {path.name for path in CORPUS.iterdir() if (path / "env.json").is_file()}
    assert set(labels) == folders
    assert {label["expect"] for label in labels.values()} == {"pass", "reject"}
    assert all(label["label"] and "\n" not in label["label"] for label in labels.values())
    assert all(("rule" in label) == (label["expect"] == "reject") for label in labels.values())
