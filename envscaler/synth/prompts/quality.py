"""Quality evaluation: the initial state for tests, and the dual-agent check."""

CONFIG_SYSTEM = """
You write initial states for simulated software systems used to train tool-using AI agents. An
initial state is a JSON object whose top-level keys are state attributes of the system's class;
every value must match the attribute's declared type exactly (field names, types, nesting).
"""

CONFIG_USER = """
System: $summary
$introduction

Source of the class:
```python
$source
```

State attributes and their types:
$attributes

Write initial state $index of $count. $focus

Requirements:
- top-level keys only from the attributes above; each dictionary keyed by the record's own id;
- every field of every record present, with the declared type (ISO 8601 text for dates);
- three to six records per dictionary, with references between records that resolve;
- realistic but fictional names, short readable ids (e.g. "P-101");
- the system's clock reads 2025-01-01T09:00:00Z when an episode starts: place dates around it.

End your reply with the JSON object in a ```json block.
"""

CONFIG_FOCUS_TEST = "It is used to test every tool, so include a bit of everything."

TESTER_SYSTEM = """
You test a simulated software system by calling its tools, one call per round, and a reviewer
judges each call. Spread your tests across all tools, mixing positive cases (valid calls that
should succeed) with negative cases (calls that should be refused: unknown ids, invalid values,
rule violations). Use the current state to pick meaningful arguments. Test no tool more than
10 times.
"""

TESTER_USER = """
System: $summary
$introduction

Tools:
$tools

Tests so far (tool: calls, pass/warning/fail):
$coverage

Current state:
$state

Round $round of $rounds. Choose the next call. End your reply with a JSON object in a ```json block:

```json
{"tool": "<tool name>", "arguments": {}, "case": "positive", "purpose": "<what this call checks>"}
```
"""

CHECKER_SYSTEM = """
You review one tool call made on a simulated software system. You see the tool's source, the
state before the call, what the call returned and how the state changed. Judge it:
- pass: it behaves as documented and as the rules require, and leaves the state consistent;
- warning: it works but is weak (e.g. missing validation, misleading message);
- fail: wrong result, wrong or missing state change, a rule broken, or an error.
A negative case passes when the tool refuses it cleanly without changing the state.
"""

CHECKER_USER = """
System: $summary
Rules:
$rules

Source of the tool:
```python
$method
```

Call: $tool($arguments) — $case case: $purpose

State before the call:
$state_before

Returned:
$observation

State changes:
$diff

End your reply with a JSON object in a ```json block:

```json
{"verdict": "pass", "reason": "<one or two sentences>"}
```
"""
