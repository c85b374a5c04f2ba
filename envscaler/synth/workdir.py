"""The work directory of a run: one JSON file per finished item of each stage, for resume.

``<root>/stages/<stage>/<item>.json`` holds ``{"item", "status": "ok"|"dropped", "fingerprint",
"data", "reason"}``. The fingerprint is the sha256 of the item's input (and the stage's model
settings): a changed input makes the stored result stale, so the item is done again. Files are
written atomically (temporary file, then rename), so an interrupted run never leaves half a result.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envscaler.synth.transcript import canonical_json

DEFAULT_NAME = ".synth"  # the work directory inside an output folder (dot: the loader skips it)
OK = "ok"
DROPPED = "dropped"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class ItemRecord:
    item: str
    status: str
    fingerprint: str
    data: Any = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"item": self.item, "status": self.status, "fingerprint": self.fingerprint,
                "data": self.data, "reason": self.reason}


def fingerprint(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


class WorkDir:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, stage: str, item: str) -> Path:
        name = _UNSAFE.sub("_", item.replace("/", "__"))
        return self.root / "stages" / stage / f"{name}.json"

    def load(self, stage: str, item: str, expected: str) -> ItemRecord | None:
        """The stored result of ``item``, or None when there is none or it is stale."""
        path = self._path(stage, item)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            record = ItemRecord(item=data["item"], status=data["status"],
                                fingerprint=data["fingerprint"], data=data.get("data"),
                                reason=data.get("reason"))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if record.item != item or record.fingerprint != expected or \
                record.status not in (OK, DROPPED):
            return None
        return record

    def save(self, stage: str, record: ItemRecord) -> None:
        path = self._path(stage, record.item)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".tmp{os.getpid()}")
        temporary.write_text(json.dumps(record.to_dict(), indent=1, sort_keys=True,
                                        ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(temporary, path)

    def count(self, stage: str) -> int:
        folder = self.root / "stages" / stage
        return len(list(folder.glob("*.json"))) if folder.is_dir() else 0
