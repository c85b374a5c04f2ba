"""The synchronous client: `EnvClient` and its `Session`."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx

from envscaler_client import _api
from envscaler_client._protocol import ApiRequest, ClientBase, Flow, drive_sync, exchange
from envscaler_client._session import SessionData, SessionView
from envscaler_client.models import (
    CallResult,
    EnvDetail,
    EnvSummary,
    Health,
    Readiness,
    ResetResult,
    ScenarioSummary,
    SessionInfo,
    SessionState,
    Trajectory,
    Validation,
)

T = TypeVar("T")


class EnvClient(ClientBase):
    """A gateway client holding one pooled ``httpx.Client`` (connections are reused).

    ``api_key`` is sent as ``Authorization: Bearer``. Failed requests are retried by ``retry``
    when that is safe (see `envscaler_client.retry`). Close it, or use it as a context manager.
    """

    _http: httpx.Client

    def _open(self) -> httpx.Client:
        return httpx.Client(**self.config.http_kwargs())

    def _drive(self, flow: Flow[T]) -> T:
        return drive_sync(self._http, flow)

    def _request(self, request: ApiRequest[T]) -> T:
        return self._drive(exchange(request, self.config.retry))

    # ------------------------------------------------------------------ gateway

    def health(self) -> Health:
        return self._request(_api.health())

    def ready(self) -> Readiness:
        """``ready`` is False (not an exception) when Redis or the sandbox backend is down."""
        return self._request(_api.ready())

    def envs(self) -> list[EnvSummary]:
        return self._request(_api.list_envs())

    def env(self, env_id: str) -> EnvDetail:
        return self._request(_api.get_env(env_id))

    def scenarios(self, env: str, split: str | None = None) -> list[ScenarioSummary]:
        return self._request(_api.list_scenarios(env, split))

    # ------------------------------------------------------------------ sessions

    def create_session(self, env: str, scenario: str | None = None,
                       init_config: Mapping[str, Any] | None = None, seed: int = 0) -> Session:
        """A new session on its own sandbox. Retried only when the gateway was not reached (see
        `envscaler_client.retry`): close the session, or use it as a context manager."""
        created = self._request(_api.create_session(env, scenario, init_config, seed))
        return Session(self, SessionData.created(created))

    def open_snapshot(self, snapshot_id: str) -> Session:
        """A new session at a snapshot's point (`Session.snapshot`), on any gateway of the same
        Redis; its next calls answer as the snapshotted session's did."""
        created = self._request(_api.open_snapshot(snapshot_id))
        return Session(self, SessionData.created(created))

    def session(self, session_id: str, agent_token: str | None = None) -> Session:
        """Attach to an existing session. With ``agent_token``, tool calls use it and only the tools
        are known (the token may do nothing else)."""
        data = self._drive(_api.attach_flow(session_id, agent_token, self.config.retry))
        return Session(self, data)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Session(SessionView):
    """One session: its ``id``, ``task``, ``tools`` (OpenAI function format) and ``agent_token``.

    As a context manager it is always closed on exit, whatever happened inside.
    """

    def __init__(self, client: EnvClient, data: SessionData) -> None:
        super().__init__(data)
        self._client = client

    def call(self, name: str, arguments: Mapping[str, Any] | str | None = None,
             call_id: str | None = None, *, ordered: bool = False) -> CallResult:
        """Call a tool. ``arguments``: an object or a JSON string. ``call_id`` (generated when not
        given) makes the call safe to retry: the gateway never runs one call_id twice. A tool that
        fails answers ``ok=False``; the request failing raises. ``ordered``: the call takes effect
        after every ordered call made before it through this object in this episode, even when
        they run concurrently (it carries the next ``seq``); `tool_message` always orders."""
        return self._client._request(
            _api.session_call(self._data, name, arguments, call_id, ordered))

    def info(self) -> SessionInfo:
        return self._client._request(_api.session_info(self.id))

    def state(self) -> SessionState:
        return self._client._request(_api.state(self.id))

    def trajectory(self) -> Trajectory:
        return self._client._request(_api.trajectory(self.id))

    def reset(self, scenario: str | None = None, seed: int | None = None,
              init_config: Mapping[str, Any] | None = None) -> ResetResult:
        """Back to the start of the scenario (or another one, a seed, an init_config)."""
        return self._client._drive(_api.reset_flow(self._data, scenario, seed, init_config,
                                                   self._client.config.retry))

    def validate(self) -> Validation:
        """Run the scenario's checks: ``reward`` = passed / total. Changes nothing."""
        return self._client._request(_api.validate(self.id))

    def fork(self, count: int = 1) -> list[Session]:
        """``count`` (1-64) new sessions at exactly this one's point (state, step, the episode's
        trajectory, clock and random state), each independent from then on, each with its own
        agent token; this session goes on. Close them as any session."""
        forked = self._client._request(_api.fork(self.id, count))
        return [Session(self._client, SessionData.created(s)) for s in forked.sessions]

    def snapshot(self) -> str:
        """Store this session's point (by content, for ``ENVSCALER_SNAPSHOT_TTL``): an id that
        `EnvClient.open_snapshot` opens on any gateway of the same Redis."""
        return self._client._request(_api.snapshot(self.id)).snapshot_id

    def close(self) -> None:
        """End the session and its sandbox; does nothing the second time."""
        self._client._drive(_api.close_flow(self._data, self._client.config.retry))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._client._drive(_api.close_flow(self._data, self._client.config.retry, exc))
