"""Doors of other ecosystems: each protocol of a trainer or harness, on the gateway's edge.

One module per protocol (`openenv`, `ors`, `nemo_gym`), each exposing the ``router`` that
`envscaler.server.app` includes. A door only translates: every session it opens, every tool call, reset,
reward and close goes through `envscaler.server.sessions.SessionService`, the same operations as REST, so
isolation, idempotency, limits, quotas, authentication and the trajectory are the gateway's own;
its errors are the gateway's `envscaler.server.errors.ApiError` table, framed in the protocol's own error
form.

What the doors share: `episodes` (the terminal ``submit`` tool and its reward, a protocol's session
handles bound to gateway sessions) and `tasks` (the scenarios as a protocol's task lists, whose
specs name a scenario and never carry its solution, checklist or initial state).
"""
