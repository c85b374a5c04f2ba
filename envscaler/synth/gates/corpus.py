"""The gates' precision and recall on a labelled corpus of good and deliberately broken
environments (``tests/fixtures/gate_corpus``).

``labels.json`` maps each environment folder to ``{"expect": "pass"}`` or ``{"expect": "reject",
"rule": RULE}`` with a one-line ``label``. A broken environment counts as caught when the gates
reject it, and as caught *for its reason* when RULE is among the rules of their problems (a
format failure is ``format``; a scenario gate's rule is ``scenario:RULE``). Precision is the
share of rejections that were broken environments, recall the share of broken environments
rejected.

``python -m envscaler.synth.gates.corpus DIR [--json]``: the figures and every misjudged environment, in
sandboxes as ``envscaler gate`` makes them; exit 1 when any environment is misjudged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envscaler.synth.gates.folders import EnvGateReport, gate_folder
from envscaler.synth.sandboxes import SandboxHub

LABELS = "labels.json"


@dataclass(frozen=True)
class Verdict:
    """One environment: what it is labelled, and the rules the gates rejected it by."""

    env_id: str
    expect: str  # "pass" | "reject"
    rule: str | None
    label: str
    rules: tuple[str, ...]

    @property
    def rejected(self) -> bool:
        return bool(self.rules)

    @property
    def correct(self) -> bool:
        """Passed when good; rejected, for its labelled rule among others, when broken."""
        if self.expect == "pass":
            return not self.rejected
        return self.rule in self.rules


@dataclass
class CorpusReport:
    verdicts: list[Verdict] = field(default_factory=list)

    def _count(self, expect: str, rejected: bool) -> int:
        return sum(1 for v in self.verdicts if v.expect == expect and v.rejected == rejected)

    @property
    def precision(self) -> float:
        caught, false_alarms = self._count("reject", True), self._count("pass", True)
        return caught / (caught + false_alarms) if caught + false_alarms else 1.0

    @property
    def recall(self) -> float:
        caught, missed = self._count("reject", True), self._count("reject", False)
        return caught / (caught + missed) if caught + missed else 1.0

    @property
    def right_reason(self) -> float:
        """Among broken environments, the share rejected for their labelled rule."""
        broken = [v for v in self.verdicts if v.expect == "reject"]
        return sum(v.correct for v in broken) / len(broken) if broken else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"good": sum(v.expect == "pass" for v in self.verdicts),
                "broken": sum(v.expect == "reject" for v in self.verdicts),
                "precision": round(self.precision, 4), "recall": round(self.recall, 4),
                "right_reason": round(self.right_reason, 4),
                "misjudged": [{"env": v.env_id, "expect": v.expect, "rule": v.rule,
                               "label": v.label, "rules": list(v.rules)}
                              for v in self.verdicts if not v.correct]}


def rules_of(report: EnvGateReport) -> tuple[str, ...]:
    """Every rule the gates rejected ``report``'s environment by, sorted."""
    found: set[str] = set()
    if report.format_error or report.skipped_scenarios:
        found.add("format")
    for gate in (report.static, report.executable):
        if gate is not None:
            found |= {problem.rule for problem in gate.problems}
    for result in report.scenarios.values():
        found |= {f"scenario:{problem.rule}" for problem in result.problems}
    return tuple(sorted(found))


async def run_corpus(root: Path, hub: SandboxHub, *, seed: int = 0) -> CorpusReport:
    labels: dict[str, dict[str, str]] = json.loads((root / LABELS).read_text())
    report = CorpusReport()
    for env_id, label in sorted(labels.items()):
        gated = await gate_folder(root / env_id, hub, seed=seed)
        report.verdicts.append(Verdict(env_id, label["expect"], label.get("rule"),
                                       label["label"], rules_of(gated)))
    return report


async def _main(root: Path) -> CorpusReport:
    hub = SandboxHub.from_environment(limit=2)
    try:
        return await run_corpus(root, hub)
    finally:
        await hub.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envscaler.synth.gates.corpus", description=__doc__
                                     .split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="a folder of environments with labels.json")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = asyncio.run(_main(args.corpus))
    data = report.to_dict()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(f"{data['good']} good and {data['broken']} broken environments: precision "
              f"{data['precision']:.2f}, recall {data['recall']:.2f}, rejected for the labelled "
              f"reason {data['right_reason']:.2f}")
        for wrong in data["misjudged"]:
            print(f"misjudged {wrong['env']} ({wrong['label']}): expected {wrong['expect']}"
                  f"{' by ' + wrong['rule'] if wrong['rule'] else ''}, got "
                  f"{', '.join(wrong['rules']) or 'pass'}")
    return 0 if not data["misjudged"] else 1


if __name__ == "__main__":
    sys.exit(main())
