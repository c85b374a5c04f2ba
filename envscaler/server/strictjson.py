"""Strict JSON at the gateway's door: finite numbers and valid Unicode only.

Python's JSON parser accepts ``NaN`` and ``Infinity`` and decodes ``"\\ud800"`` to a lone
surrogate; neither can be stored (Redis takes UTF-8) nor sent to a sandbox (the wire is strict
JSON), so tool arguments and initial configurations holding them are refused with 422 naming the
field, before anything runs. The check is one C-speed ``json.dumps``; the walk that names the
field runs only when that fails.
"""

from __future__ import annotations

import json
import math
from typing import Any

# json.dumps(value, ensure_ascii=False, allow_nan=False), without making an encoder per call
_STRICT = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def problem(value: Any) -> tuple[str, str] | None:
    """None when ``value`` is strict JSON; otherwise (dotted path of the culprit, reason)."""
    try:
        _STRICT.encode(value).encode("utf-8")
        return None
    except RecursionError:
        return "", "is nested too deeply"
    except ValueError:  # NaN or Infinity; UnicodeEncodeError (a ValueError) for surrogates
        path, reason = _find(value, [])
        return path, reason or "is not strict JSON"


def _find(value: Any, path: list[str]) -> tuple[str, str]:
    if isinstance(value, float) and not math.isfinite(value):
        return ".".join(path), f"{value} is not a finite number (JSON has no NaN or Infinity)"
    if isinstance(value, str) and not _encodable(value):
        return ".".join(path), "is not valid Unicode text (a lone surrogate)"
    if isinstance(value, dict):
        for key, item in value.items():
            if not _encodable(str(key)):
                return ".".join(path), "has a key that is not valid Unicode text"
            found = _find(item, [*path, str(key)])
            if found[1]:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _find(item, [*path, str(index)])
            if found[1]:
                return found
    return ".".join(path), ""


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False
