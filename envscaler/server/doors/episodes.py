"""What every door does the same way: who may use it, a tool call's request, the terminal
``submit`` tool and its reward, and a protocol's session handles bound to gateway sessions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from envscaler.server.auth import SESSION_ID_RE, Authenticator, Principal
from envscaler.server.calls import call_request
from envscaler.server.catalogue import ServedEnv, tool_name, tool_parameters
from envscaler.server.errors import ApiError, forbidden, invalid_arguments, not_found, redis_failed
from envscaler.server.models import CallRequest
from envscaler.server.sessions import SessionService, new_session_id

SUBMIT = "submit"
SUBMIT_DESCRIPTION = ("End the episode: the environment's checks judge its state, and the answer "
                      "is the reward (checks passed / total). Call it when the task is done.")
SUBMIT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def tools_with_submit(env: ServedEnv, schema_key: str) -> list[dict[str, Any]]:
    """The environment's tools and ``submit`` as a door lists them: name, description, and the
    arguments' JSON schema under ``schema_key`` (MCP's ``inputSchema``, ORS's ``input_schema``)."""
    tools = [{"name": tool_name(schema),
              "description": schema.get("function", schema).get("description") or "",
              schema_key: tool_parameters(schema)} for schema in env.tools]
    return [*tools, {"name": SUBMIT, "description": SUBMIT_DESCRIPTION,
                     schema_key: SUBMIT_SCHEMA}]


def admin_caller(auth: Authenticator, authorization: str | None) -> Principal:
    """The caller of a door: an API key (or anyone, without API keys). A door opens, resets,
    judges and closes sessions, which REST allows API keys only; an agent token is refused."""
    caller = auth.authenticate(authorization)
    if not caller.is_admin:
        raise forbidden("this door opens and judges sessions: it takes an API key, not an "
                        "agent token")
    return caller


def tool_call(name: str, arguments: Any, call_id: Any = None, seq: Any = None) -> CallRequest:
    """A door's tool call (absent arguments are none) through `call_request`, so that REST's
    rules and limits hold at every door (422 ``InvalidRequest`` otherwise)."""
    return call_request({"name": name, "arguments": {} if arguments is None else arguments,
                         "call_id": call_id, "seq": seq})


async def submit(service: SessionService, caller: Principal, session_id: str) -> dict[str, Any]:
    """The terminal tool: `validate`'s reward, with the counts but not the checks themselves
    (their text would tell a policy what is judged)."""
    validation = await service.validate(caller, session_id)
    return {key: validation[key] for key in ("reward", "passed", "total")}


def _no_arguments(arguments: dict[str, Any] | str) -> None:
    """``submit`` takes none (its schema says so): an argument is refused, naming it."""
    if isinstance(arguments, dict) and arguments:
        field = next(iter(arguments))
        raise invalid_arguments(f"{SUBMIT} takes no arguments, not {field!r}", field=field)
    if isinstance(arguments, str) and arguments.strip() not in ("", "{}"):
        raise invalid_arguments(f"{SUBMIT} takes no arguments", field="arguments")


@dataclass(frozen=True)
class Outcome:
    """A tool call (or ``submit``) as every door answers it: a result, or an error object with
    the HTTP status REST would have answered."""

    result: Any = None
    error: dict[str, Any] | None = None
    status: int = 200
    done: bool = False
    reward: float | None = None


async def call(service: SessionService, caller: Principal, session_id: str, name: str,
               arguments: Any, call_id: str | None = None) -> Outcome:
    """A tool call through `SessionService.call` (parsed by `tool_call`), or the terminal
    ``submit`` through `SessionService.validate`."""
    try:
        request = tool_call(name, arguments, call_id)
        if request.name == SUBMIT:
            _no_arguments(request.arguments)
            reward = await submit(service, caller, session_id)
            return Outcome(result=reward, done=True, reward=reward["reward"])
        done = await service.call(caller, session_id, request.name, request.arguments,
                                  request.call_id)
    except ApiError as exc:
        return Outcome(error=exc.body()["error"], status=exc.status)
    body = done.body()
    if not body["ok"]:
        return Outcome(error=body["error"], status=done.status)
    return Outcome(result=body["result"])


class Bindings:
    """A protocol's own session handle (minted here, before the protocol names a scenario) ->
    the gateway session opened for it, in Redis, so that any gateway serves the next request.
    A handle lives as long as a session record (``record_ttl``)."""

    def __init__(self, redis: Redis, protocol: str, ttl: float) -> None:
        self.redis = redis
        self.prefix = f"envscaler:door:{protocol}:"
        self.ttl = max(1, int(ttl))

    @staticmethod
    def mint() -> str:
        return new_session_id()

    @staticmethod
    def check(handle: str | None) -> str:
        if handle is None or not SESSION_ID_RE.match(handle):
            raise not_found("UnknownSession", f"no such session {handle!r} (malformed id)")
        return handle

    async def bind(self, handle: str, session_id: str, replace: bool = False) -> bool:
        """Bind ``handle`` to ``session_id``; False when it is bound already (unless
        ``replace``)."""
        try:
            done = await self.redis.set(self.prefix + self.check(handle), session_id,
                                        ex=self.ttl, nx=not replace)
        except RedisError as exc:
            raise redis_failed(exc) from exc
        return bool(done)

    async def get(self, handle: str | None) -> str | None:
        try:
            return await self.redis.get(self.prefix + self.check(handle))
        except RedisError as exc:
            raise redis_failed(exc) from exc

    async def session(self, handle: str | None) -> str:
        """The gateway session of ``handle``, or 404 ``UnknownSession``."""
        session_id = await self.get(handle)
        if session_id is None:
            raise not_found("UnknownSession", f"no session {handle!r} (never created here, or "
                            "its record expired)")
        return session_id

    async def drop(self, handle: str) -> None:
        try:
            await self.redis.delete(self.prefix + self.check(handle))
        except RedisError as exc:
            raise redis_failed(exc) from exc
