"""JSON Merge Patch (RFC 7386): a scenario's changes on top of its environment's shared database.

The one implementation: the runtime applies it when it builds an environment, and tooling that
needs a scenario's whole initial configuration outside a sandbox (gates, benchmarks) imports it
from here (standard library only, like the rest of the runtime).
"""

from __future__ import annotations

from typing import Any


def apply(target: Any, patch: Any) -> Any:
    """``target`` with ``patch`` merged in: an object merges key by key, ``null`` removes a key,
    anything else replaces. ``target`` is changed in place where it is an object; ``patch`` is
    never changed, and its values are copied so the result shares nothing with it."""
    if not isinstance(patch, dict):
        return _copy(patch)
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = apply(target.get(key), value)
    return target


def _copy(value: Any) -> Any:
    if isinstance(value, list):
        return [_copy(item) for item in value]
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    return value
