"""Logic modelling: state, class skeleton, operations, one method per operation."""

DESIGNER_SYSTEM = """
You are a software designer building simulated systems in Python for training tool-using AI
agents. Each system is one self-contained class whose state lives in instance attributes, mostly
dictionaries of records keyed by id. Agents act on it only through its public methods (tools).
Designs must be concrete, internally consistent and free of external services.
"""

STATE_USER = """
System: $summary
$introduction

An example task in this system:
<<<
$task
>>>

Define the state of the system: the kinds of records it holds and the rules that constrain them.
Aim for what the example task and similar tasks need: not a toy, not an enterprise suite. Use two
to six entities; every entity has an id attribute. Rules are conditions on the state that tools
must enforce: limits, allowed status values and transitions, references between records.

End your reply with a JSON object in a ```json block:

```json
{
  "entities": [
    {"entity": "Patient", "attributes": "patient_id, name, phone, email, status", "description": "..."}
  ],
  "rules": ["An appointment must refer to an existing patient.", "..."]
}
```
"""

SKELETON_USER = """
System: $summary
$introduction

Entities:
$entities

Rules:
$rules

Write the skeleton of the class as one Python module:
- imports from `typing` only;
- one `TypedDict` per entity, named `<Entity>Info`, with a type hint for every attribute
  (`Optional[...]` for attributes that may be empty, `str` for dates as ISO 8601 text);
- one class with a CamelCase name describing the system, holding only
  `__init__(self, init_config: dict)`, which declares one empty dictionary per entity, e.g.
  `self.patients: Dict[str, PatientInfo] = {}` (keys are the record ids), plus
  `self.init_config = init_config`, and writes every rule as a comment;
- no other methods, no I/O, nothing run at import time.

Reply with the module in a single ```python block.
"""

OPERATIONS_USER = """
System: $summary
$introduction

Rules:
$rules

Class skeleton:
```python
$skeleton
```

An example task in this system:
<<<
$task
>>>

List the operations (tools) of the system. Include everything the example task needs, and go
beyond it: look-ups by id and by other fields, listings with filters, creation, updates,
cancellation or deletion, and administrative operations, so that agents meet a rich and realistic
tool set. Each operation is either a `query` (reads state only) or a `state_change`. Give between
$min_operations and $max_operations operations, with snake_case names, and no operation that needs
the outside world (model a notification, for example, as a record stored in the state).

End your reply with a JSON object in a ```json block:

```json
{"operations": [{"name": "get_patient", "description": "...", "type": "query"}]}
```
"""

METHOD_SYSTEM = """
You implement one method of a Python class that simulates a software system for training
tool-using AI agents. Rules for the code:

1. Write exactly one method, `def <name>(self, ...)`, as it would appear inside the class, in a
   single ```python block. Put any imports it needs above it; only these standard modules are
   allowed: $modules.
2. Give every parameter a type hint and write a Google-style docstring: a description, an `Args:`
   entry per parameter, and `Returns:`.
3. Validate the arguments first: their types (isinstance) and values (ids that exist, allowed
   values, positive quantities). Invalid input returns {"success": False, "error": "<reason>"}.
4. Never raise. Every `return` is a dict literal: a query returns
   {"success": True, "data": ...}; a state change returns {"success": True, "message": "..."}
   (and may add "data"). Failures return {"success": False, "error": "..."}.
5. Enforce the rules of the system and keep the state consistent: update every record an action
   affects.
6. Return plain JSON values only: dict, list, str, int, float, bool, None. No sets, datetime
   objects or class instances (convert dates with .isoformat()).
7. Use only the attributes of the class; do not call the other tools. Private helpers are not
   available. No files, network, environment variables, subprocesses, exec/eval, dunder attributes,
   getattr/setattr with computed names, global variables, or writes to class attributes.
8. For the current time use datetime.now() (the system supplies a deterministic clock). Make new
   ids from the data, e.g. f"APT-{len(self.appointments) + 1:04d}", skipping ids already taken.
"""

METHOD_USER = """
System: $summary
$introduction

Rules:
$rules

Class skeleton:
```python
$skeleton
```

All operations of the class (for context; implement only the one below):
$operations

Implement this operation:
- name: $name
- type: $type
- description: $description
"""
