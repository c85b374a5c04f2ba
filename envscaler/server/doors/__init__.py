"""Doors: the protocols of other ecosystems (trainers, harnesses, agents) on the gateway's edge.

One module per protocol, each declaring its `Door` as ``DOOR``: `mcp` (MCP, per session),
`openenv`, `ors` and `nemo_gym`. `envscaler.server.app` mounts every door it finds here
(`discover`), after the gateway's REST routes. A door only translates: every session it opens,
every tool call, reset, reward and close goes through `envscaler.server.sessions.SessionService`,
the same operations as REST, so isolation, idempotency, limits, quotas, authentication and the
trajectory are the gateway's own; its errors are the gateway's error table
(`envscaler.server.errors`), rendered in the protocol's own error form.

What the doors share: `episodes` (the terminal ``submit`` tool and its reward, a protocol's session
handles bound to gateway sessions) and `tasks` (the scenarios as a protocol's task lists, whose
specs name a scenario and never carry its solution, checklist or initial state); a module without
``DOOR`` is such a helper.

Adding a door
-------------

1. Write one module in this package, say ``doors/gem.py``, with the protocol's routes on an
   ``APIRouter`` (``include_in_schema=False`` unless they belong in the gateway's OpenAPI
   document). Work through ``request.app.state.service`` (`SessionService`) and authenticate with
   ``request.app.state.auth`` (`episodes.admin_caller` takes an API key only).
2. Parse a tool call with `envscaler.server.calls.call_request` (`episodes.tool_call` when
   absent arguments mean none; `episodes.call` also answers the terminal ``submit``), so that
   the calls hold to REST's rules; raise `envscaler.server.errors.ApiError`, and render the ones
   you catch in the protocol's error form (left alone they answer as REST's JSON errors).
3. Declare it at the end of the module::

       DOOR = Door(name="gem", router=router)

   with, when the door needs them:

   - ``order``: doors are mounted by order, then name, and routes match in mounting order; a
     door with paths at the gateway's root takes `LAST` (ORS does);
   - ``call_path``: whether a path is one of its tool calls, which then get a tool call's body
     limits (`envscaler.server.limits.BodyLimit`), as NeMo Gym's ``/nemo-gym/{env}/{tool}``;
   - ``layer``: an ASGI layer around the whole gateway (the MCP door's frames every refusal on
     its paths, the outer layers' too, as a JSON-RPC error);
   - a lifespan, on its router (``APIRouter(lifespan=...)``): it runs inside the gateway's, once
     the session service is up (the MCP door's runs the MCP SDK's session manager).

Nothing else changes: no other module names a door. Test it over HTTP against a real gateway,
as tests/integration/test_doors.py does for the others.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import APIRouter
from starlette.types import ASGIApp

LAST = 100  # the order of a door with paths at the root: mounted after every other


@dataclass(frozen=True)
class Door:
    """One protocol on the gateway's edge, as its module declares it (``DOOR``)."""

    name: str
    router: APIRouter  # its routes, and its lifespan if it has one
    order: int = 0  # mounted by order, then name; routes match in mounting order
    call_path: Callable[[str], bool] | None = None  # a path of its tool calls: their body limits
    layer: Callable[[ASGIApp], ASGIApp] | None = None  # an ASGI layer around the whole gateway


def discover() -> list[Door]:
    """Every door of this package (each module's ``DOOR``), in mounting order."""
    doors = []
    for module in pkgutil.iter_modules(__path__):
        door = getattr(importlib.import_module(f"{__name__}.{module.name}"), "DOOR", None)
        if isinstance(door, Door):
            doors.append(door)
    return sorted(doors, key=lambda door: (door.order, door.name))
