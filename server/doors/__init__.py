"""The gateway's doors for other ecosystems' protocols, one module each.

Each maps its protocol onto `server.sessions.SessionService` (create, tool calls, reset, validate,
delete), so isolation, idempotency, limits, quotas, authentication and the trajectory are those
of the REST API, and refusals come from the same error table (`server.errors`).
"""
