"""Prompt templates of the pipeline, as plain text (``string.Template``, ``$name`` placeholders).

One module per part of the pipeline. The wording is this project's own. Changing a template
changes the requests, so recorded transcripts must be recorded again (a replay says which stage
and item it could not find).
"""

from __future__ import annotations

from string import Template


def messages(system: str, user: str, **values: object) -> list[dict[str, str]]:
    """A system and a user message, with their ``$name`` placeholders filled in."""
    mapping = {key: str(value) for key, value in values.items()}
    return [{"role": "system", "content": Template(system.strip()).safe_substitute(mapping)},
            {"role": "user", "content": Template(user.strip()).substitute(mapping)}]
