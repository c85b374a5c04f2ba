"""Structured results of the gates: what was checked, whether it passed, and every problem found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One reason a gate failed; ``rule`` is a stable short name, ``line`` points into the
    source."""

    rule: str
    message: str
    line: int | None = None
    tool: str | None = None

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.message}"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"rule": self.rule, "message": self.message}
        if self.line is not None:
            data["line"] = self.line
        if self.tool is not None:
            data["tool"] = self.tool
        return data


@dataclass
class GateResult:
    """The outcome of one gate on one environment (or one scenario)."""

    gate: str
    problems: list[Problem] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None  # why the gate did not run, when it did not

    @property
    def passed(self) -> bool:
        return self.skipped is None and not self.problems

    def summary(self, limit: int = 3) -> str:
        """A one-line reason, e.g. for the run report: the first problems, then a count."""
        if self.skipped is not None:
            return f"{self.gate} gate skipped: {self.skipped}"
        if not self.problems:
            return f"{self.gate} gate passed"
        shown = "; ".join(str(problem) for problem in self.problems[:limit])
        more = f" (and {len(self.problems) - limit} more)" if len(self.problems) > limit else ""
        return f"{self.gate} gate: {shown}{more}"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"gate": self.gate, "passed": self.passed,
                                "problems": [problem.to_dict() for problem in self.problems]}
        if self.skipped is not None:
            data["skipped"] = self.skipped
        if self.details:
            data["details"] = self.details
        return data
