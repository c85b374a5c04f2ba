"""Who is calling: an API key (admin: everything) or a session's agent token (its tools only).

``Authorization: Bearer <token>``.

- API keys come from ``ENVSCALER_API_KEYS`` (comma-separated); each is an admin key.
- Creating a session returns an agent token ``"{session_id}.{secret}"``; Redis keeps only its
  sha256.
  It may call exactly two endpoints, for its own session: ``GET /v1/sessions/{id}/tools`` and
  ``POST /v1/sessions/{id}/calls``. Anything else answers 403 ``Forbidden``: an agent holding it
  cannot read state, the trajectory, checks or solutions, validate, reset, delete, or touch
  another session, so it cannot peek at its reward.
- With no API keys configured, a REST request without a token (or with any token that is not an
  agent token) is admin: the loopback operator's; the command line then binds loopback only. A
  request that presents an agent token is always limited to it, and held to it (a wrong secret
  answers 401). The MCP door (`envscaler.server.doors.mcp`), an agent's door, grants nothing
  anonymously: it always needs the session's agent token or an API key (``anonymous=False``).
- A 401 says why in its ``WWW-Authenticate`` too (`envscaler.server.errors.bearer_challenge`): MCP clients
  show that rather than start an OAuth login the gateway does not offer.

Secrets are compared with ``hmac.compare_digest``. The agent token's hash is checked against the
session record by `envscaler.server.sessions.SessionService` (which reads the record anyway), so the check
costs no extra Redis round trip.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from fastapi import Depends, Request
from fastapi.security import HTTPBearer

from envscaler.server.errors import forbidden, unauthorized

SESSION_ID_PATTERN = r"^[A-Za-z0-9_-]{16,64}$"
SESSION_ID_RE = re.compile(SESSION_ID_PATTERN)
AGENT_TOKEN_RE = re.compile(r"^([A-Za-z0-9_-]{16,64})\.([A-Za-z0-9_-]{20,128})$")

# Documents the scheme in OpenAPI; the header is parsed below.
bearer_scheme = HTTPBearer(auto_error=False, description="An API key, or a session's agent token")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def key_fingerprint(key: str) -> str:
    return "key:" + hashlib.sha256(key.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Principal:
    kind: str  # "admin" | "agent"
    owner: str = "anonymous"
    session_id: str | None = None
    token_hash: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.kind == "admin"


ANONYMOUS_ADMIN = Principal(kind="admin")


def agent_principal(token: str) -> Principal | None:
    """The agent that ``token`` claims to be (checked against its session's record later), or
    None when it is not shaped as an agent token."""
    match = AGENT_TOKEN_RE.match(token)
    if match is None:
        return None
    return Principal(kind="agent", owner="agent", session_id=match.group(1),
                     token_hash=token_hash(token))


class Authenticator:
    def __init__(self, api_keys: list[str]) -> None:
        self._keys = [(key.encode(), key_fingerprint(key)) for key in api_keys]

    @property
    def open(self) -> bool:
        """True when no keys are configured (loopback-only service)."""
        return not self._keys

    def authenticate(self, authorization: str | None, anonymous: bool = True) -> Principal:
        """The caller. ``anonymous``: whether, with no API keys configured, a request without a
        credential (no token, or one that is neither a key nor an agent token) is the loopback
        operator's (admin); False refuses it (401) like a gateway with keys does."""
        admit = self.open and anonymous
        if not authorization:
            if admit:
                return ANONYMOUS_ADMIN
            raise unauthorized("missing 'Authorization: Bearer <API key or agent token>'",
                               missing=True)
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise unauthorized("the Authorization header must be 'Bearer <API key or agent token>'")
        encoded = token.encode()
        for key, fingerprint in self._keys:
            if hmac.compare_digest(encoded, key):
                return Principal(kind="admin", owner=fingerprint)
        agent = agent_principal(token)
        if agent is not None:
            return agent
        if admit:
            return ANONYMOUS_ADMIN
        raise unauthorized("unknown API key" if self._keys else
                           "not an agent token (this gateway has no API keys: only the session's "
                           "agent token is accepted here)")


async def principal(request: Request, _credentials: object = Depends(bearer_scheme)) -> Principal:
    return request.app.state.auth.authenticate(request.headers.get("authorization"))


async def admin(caller: Principal = Depends(principal)) -> Principal:
    """Dependency of every endpoint that agent tokens may not use."""
    if not caller.is_admin:
        raise forbidden("an agent token may only list and call its own session's tools")
    return caller


def check_agent(caller: Principal, session_id: str) -> None:
    """An agent token may reach only its own session (the hash is verified with the record)."""
    if not caller.is_admin and caller.session_id != session_id:
        raise forbidden("this agent token belongs to another session")


def verify_agent(caller: Principal, session_id: str, stored_hash: str | None) -> None:
    """Raise 401 unless ``caller`` is admin or holds the token whose hash is ``stored_hash``."""
    if caller.is_admin:
        return
    check_agent(caller, session_id)
    if not stored_hash or not hmac.compare_digest(stored_hash, caller.token_hash or ""):
        raise unauthorized("invalid agent token")
