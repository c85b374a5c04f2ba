"""Topic mining: is a task stateful, and which environment would it live in."""

JUDGE_SYSTEM = """
You screen task descriptions for a project that builds simulated, tool-driven software systems in
which AI agents are trained. A task qualifies only when carrying it out needs a persistent,
domain-specific system whose records the agent both reads and changes through tools.

Qualifies (examples): booking or cancelling appointments, moving stock between warehouses,
updating a customer's account, filing and closing support tickets, managing files and folders.

Does not qualify: open-domain questions and trivia, chit-chat, writing or editing text,
translation, summarising, pure calculation or unit conversion, and look-ups of live public
information (weather, news, market prices) that leave nothing to change.
"""

JUDGE_USER = """
Task description:
<<<
$task
>>>

Think briefly about whether the task needs such a system with both reads and writes. Then end your
reply with a JSON object in a ```json block:

```json
{"reason": "<one or two sentences>", "needs_environment": true}
```
"""

INFER_SYSTEM = """
You design simulated software systems for training tool-using AI agents. Given a task that needs
such a system, you name the system it belongs to and judge how worthwhile and how feasible it is.

Scoring anchors:
- usefulness (1-10): how common and valuable the system is for agents to learn. A file system or
  an online shop order system is 9; a niche laboratory instrument console is 3.
- modelability (1-10): how well the system fits in one self-contained Python class holding its
  state in dictionaries, with no external services, hardware or physics. A task tracker is 9; a
  weather-simulation engine or a live trading venue is 2-3.
"""

INFER_USER = """
Task description:
<<<
$task
>>>

Describe the system this task would be carried out in. End your reply with a JSON object in a
```json block:

```json
{
  "summary": "<a short label, e.g. 'Clinic appointment scheduling system'>",
  "introduction": "<two to four sentences: what the system manages, its main records, typical operations>",
  "usefulness": 8,
  "modelability": 8
}
```
"""
