"""Differences between two JSON states, as a list of changes with paths (for the checking agent)."""

from __future__ import annotations

import json
from typing import Any

MAX_CHANGES = 200
IGNORED_ATTRIBUTES = frozenset({"init_config"})  # a mirror of the other attributes (EnvScaler)


def state_diff(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """``[{"path", "change": "added"|"removed"|"changed", "before"?, "after"?}]``, sorted by path."""
    changes: list[dict[str, Any]] = []
    _diff(before, after, path, changes, top=True)
    return changes[:MAX_CHANGES]


def _diff(before: Any, after: Any, path: str, changes: list[dict[str, Any]], top: bool) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            if top and key in IGNORED_ATTRIBUTES:
                continue
            where = f"{path}.{key}" if path else str(key)
            if key not in before:
                changes.append({"path": where, "change": "added", "after": after[key]})
            elif key not in after:
                changes.append({"path": where, "change": "removed", "before": before[key]})
            else:
                _diff(before[key], after[key], where, changes, top=False)
        return
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (a, b) in enumerate(zip(before, after, strict=True)):
            _diff(a, b, f"{path}[{index}]", changes, top=False)
        return
    if json.dumps(before, sort_keys=True) != json.dumps(after, sort_keys=True):
        changes.append({"path": path or "(root)", "change": "changed", "before": before,
                        "after": after})


def diff_text(changes: list[dict[str, Any]]) -> str:
    if not changes:
        return "(no change)"
    lines = []
    for change in changes:
        if change["change"] == "added":
            lines.append(f"+ {change['path']} = {json.dumps(change['after'], sort_keys=True)}")
        elif change["change"] == "removed":
            lines.append(f"- {change['path']} (was {json.dumps(change['before'], sort_keys=True)})")
        else:
            lines.append(f"~ {change['path']}: {json.dumps(change['before'], sort_keys=True)} -> "
                         f"{json.dumps(change['after'], sort_keys=True)}")
    return "\n".join(lines)
