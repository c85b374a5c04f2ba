"""tau-bench's reward as a check function.

tau's ``Env.calculate_reward`` gives 1.0 when the database's hash after the agent's actions equals
the hash after the task's ground-truth actions (``consistent_hash(to_hashable(data))``: sha256 of
the ``str`` of the data with every dict turned into its sorted items), and every required output
appears, lowercased, in one of the agent's messages to the user with its commas removed; else 0.0.
The check is one function, so the served reward is tau's, 0 or 1. ``to_hashable`` is written here
once: the importer hashes the state the ground truth leaves with it, and the check carries its
source, so both sides hash alike. A state arrives as JSON, which keeps what tau's hash sees (ints
and floats apart, lists in order; a tuple, which JSON makes a list, hashes as a list does).
"""

from __future__ import annotations

import inspect
from hashlib import sha256
from typing import Any


def to_hashable(item: Any) -> Any:
    """tau's ``to_hashable``: dicts become their sorted items, lists and sets tuples."""
    if isinstance(item, dict):
        return tuple((key, to_hashable(value)) for key, value in sorted(item.items()))
    if isinstance(item, list):
        return tuple(to_hashable(element) for element in item)
    if isinstance(item, set):
        return tuple(sorted(to_hashable(element) for element in item))
    return item


def data_hash(state: dict[str, Any], keys: tuple[str, ...]) -> str:
    """tau's ``get_data_hash`` of the database part (``keys``) of a served state."""
    data = {key: state.get(key) for key in keys}
    return sha256(str(to_hashable(data)).encode("utf-8")).hexdigest()


def outputs_found(messages: list[str], outputs: tuple[str, ...]) -> bool:
    """Every required output in one of the messages, as tau compares them."""
    texts = [str(message).lower().replace(",", "") for message in messages]
    return all(any(output.lower() in text for text in texts) for output in outputs)


def check_source(keys: tuple[str, ...], digest: str, outputs: tuple[str, ...],
                 messages: str) -> str:
    """A ``check_func(final_state)`` giving tau's reward; ``messages``: the state's attribute
    holding the agent's messages to the user."""
    helpers = "\n".join(inspect.getsource(function)
                        for function in (to_hashable, data_hash, outputs_found))
    return (f"from hashlib import sha256\nfrom typing import Any\n\n{helpers}\n"
            "def check_func(final_state):\n"
            f"    if data_hash(final_state, {keys!r}) != {digest!r}:\n"
            "        return False\n"
            f"    return outputs_found(final_state.get({messages!r}) or [], {tuple(outputs)!r})\n")


__all__ = ["check_source", "data_hash", "outputs_found", "to_hashable"]
