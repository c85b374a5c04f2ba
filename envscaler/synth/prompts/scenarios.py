"""ScenGenerator: a task per initial state, its checklist, its checks and a reference solution."""

CONFIG_FOCUSES = (
    "Make it an ordinary working day with a moderate number of records.",
    "Make it busy: many records, some of them near the limits the rules set.",
    "Include unusual cases: inactive or suspended records, cancelled or closed items.",
    "Include unfinished business that someone would need to sort out.",
    "Make it small and recent, as in a newly opened system.",
)

SCENARIO_SYSTEM = """
You write training scenarios for AI agents that operate simulated software systems through tools.
Everything you write must be consistent with the system's tools, rules and the given state.
"""

TASK_USER = """
System: $summary
$introduction

Tools:
$tools

Initial state:
$state

Write one task that a user of this system could ask an agent to do, starting from exactly this
state. The task:
- must change the state (not only look things up), and be feasible with these tools and rules;
- is compositional: two to four goals, each needing several tool calls;
- states goals, not tool calls; gives the identifiers the agent cannot look up with the tools and
  leaves the others for the agent to find;
- is at least 40 words, in the voice of the user.

End your reply with a JSON object in a ```json block: {"task": "..."}
"""

CHECKLIST_USER = """
Initial state:
$state

Task:
<<<
$task
>>>

Break the finished task down into a checklist of facts about the final state. Each item:
- starts with "Has" (e.g. "Has the appointment A-102 of patient P-7 moved to slot S-31");
- states one fact, with exact values, that a single boolean expression on the state can verify;
- is independent of the other items, and required by the task.

End your reply with a JSON object in a ```json block: {"items": ["Has ...", "Has ..."]}
"""

CHECK_USER = """
System: $summary

Initial state (the final state has the same structure):
$state

Task:
<<<
$task
>>>

Checklist item: $item

Write `def check_func(final_state):` returning True when the item holds in `final_state` and False
otherwise. Rules:
- use the field names of the state exactly; a global `initial_state` holds the initial state;
- compare explicit values with ==; for generated ids and times check only existence and type;
- use `initial_state` only to find records that were added or removed;
- do not modify either state; no imports except from the standard library; no printing.

Reply with the function in a single ```python block.
"""

SOLUTION_USER = """
Tools (OpenAI function schemas):
$tools

Initial state:
$state

Task:
<<<
$task
>>>

Write the reference solution: the tool calls that carry out the task from this initial state, in
order. The calls are replayed without looking at their results, so use only identifiers that are in
the initial state or that the task gives. Leave out look-ups whose results the later calls do not
need.

End your reply with a JSON object in a ```json block:

```json
{"calls": [{"name": "<tool>", "arguments": {}}]}
```
"""
