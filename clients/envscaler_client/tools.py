"""From a model's tool call to the ``tool`` message to append: the glue of an agent loop.

    response = openai.chat.completions.create(model=..., messages=messages, tools=session.tools)
    message = response.choices[0].message
    messages.append(message)
    for tool_call in message.tool_calls or []:
        messages.append(tool_message(session, tool_call))

A tool that fails, arguments that are not JSON or do not match the schema, and unknown tools all
become a message the model reads (``{"error": {"type", "message"}}``); anything else (the session
closed, the gateway unreachable) raises, since the episode cannot go on.
"""

from __future__ import annotations

from typing import Any

from envscaler_client._api import tool_message_flow
from envscaler_client.aio import AsyncSession
from envscaler_client.client import Session


def tool_message(session: Session, tool_call: Any) -> dict[str, Any]:
    """Run an OpenAI ``tool_calls`` item (dict or SDK object) and return the ``tool`` message."""
    return session._client._drive(
        tool_message_flow(session._data, tool_call, session._client.config.retry))


async def async_tool_message(session: AsyncSession, tool_call: Any) -> dict[str, Any]:
    """`tool_message` for an `AsyncSession`."""
    return await session._client._drive(
        tool_message_flow(session._data, tool_call, session._client.config.retry))
