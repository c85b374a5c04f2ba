"""Agreement of two score files per kind (``KIND.ours.json``: `envscaler eval ... --json`;
``KIND.theirs.json``: the benchmark's own scorer). Run: ``python -m envscaler.bench.agreement.compare DIR
KIND...``; prints, per kind and in all, the cases both scored and how many agree."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(folder: Path, kinds: list[str]) -> None:
    compared = agreed = 0
    for kind in kinds:
        theirs = json.loads((folder / f"{kind}.theirs.json").read_text())
        ours = json.loads((folder / f"{kind}.ours.json").read_text())
        both = sorted(set(theirs) & set(ours))
        differ = [key for key in both if float(theirs[key]) != float(ours[key])]
        compared, agreed = compared + len(both), agreed + len(both) - len(differ)
        passed = sum(1 for key in both if float(ours[key]) == 1.0)
        print(f"{kind}: {len(both)} compared, {len(both) - len(differ)} agree, {passed} at 1.0"
              + (f"; differ: {', '.join(differ)}" if differ else ""))
    print(f"all: {compared} compared, {agreed} agree")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
