"""The asynchronous client: `AsyncEnvClient` and its `AsyncSession`, on the sync client's flows."""

from __future__ import annotations

from collections.abc import Coroutine, Generator, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx

from envscaler_client import _api
from envscaler_client._protocol import UNCAPPED, ApiRequest, ClientBase, Flow, drive_async, exchange
from envscaler_client._session import SessionData, SessionView
from envscaler_client._transport import PoolTransport
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


class AsyncEnvClient(ClientBase):
    """A gateway client with one pooled ``httpx.AsyncClient``; see `envscaler_client.EnvClient`.

    Its connections are `envscaler_client._transport`'s pool, whose cost per request does not
    grow with the number of connections: one process drives hundreds of sessions at once.
    ``limits`` defaults to no cap (a connection per concurrent request); give
    ``connection_limits(batch)`` to hold at most a batch's worth: requests beyond a cap wait for
    a free connection, and the first wait is logged.
    """

    _http: httpx.AsyncClient
    default_limits = UNCAPPED

    def _open(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(**self.config.http_kwargs(),
                                 transport=PoolTransport(self.config.limits))

    async def _drive(self, flow: Flow[T]) -> T:
        return await drive_async(self._http, flow)

    async def _request(self, request: ApiRequest[T]) -> T:
        return await self._drive(exchange(request, self.config.retry))

    # ------------------------------------------------------------------ gateway

    async def health(self) -> Health:
        return await self._request(_api.health())

    async def ready(self) -> Readiness:
        """``ready`` is False (not an exception) when Redis or the sandbox backend is down."""
        return await self._request(_api.ready())

    async def envs(self) -> list[EnvSummary]:
        return await self._request(_api.list_envs())

    async def env(self, env_id: str) -> EnvDetail:
        return await self._request(_api.get_env(env_id))

    async def scenarios(self, env: str, split: str | None = None) -> list[ScenarioSummary]:
        return await self._request(_api.list_scenarios(env, split))

    # ------------------------------------------------------------------ sessions

    def create_session(self, env: str, scenario: str | None = None,
                       init_config: Mapping[str, Any] | None = None,
                       seed: int = 0) -> OpeningSession:
        """A new session: ``session = await client.create_session(...)``, or
        ``async with client.create_session(...) as session:`` to close it whatever happens."""
        return OpeningSession(self._create(env, scenario, init_config, seed))

    async def _create(self, env: str, scenario: str | None, init_config: Mapping[str, Any] | None,
                      seed: int) -> AsyncSession:
        created = await self._request(_api.create_session(env, scenario, init_config, seed))
        return AsyncSession(self, SessionData.created(created))

    def open_snapshot(self, snapshot_id: str) -> OpeningSession:
        """A new session at a snapshot's point (`AsyncSession.snapshot`), on any gateway."""
        return OpeningSession(self._open_snapshot(snapshot_id))

    async def _open_snapshot(self, snapshot_id: str) -> AsyncSession:
        created = await self._request(_api.open_snapshot(snapshot_id))
        return AsyncSession(self, SessionData.created(created))

    async def session(self, session_id: str, agent_token: str | None = None) -> AsyncSession:
        """Attach to an existing session; see `envscaler_client.EnvClient.session`."""
        data = await self._drive(_api.attach_flow(session_id, agent_token, self.config.retry))
        return AsyncSession(self, data)

    # ------------------------------------------------------------------ lifecycle

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class OpeningSession:
    """A session being created: await it, or use it as an async context manager (as ``aiohttp``'s
    requests), which closes the session on exit."""

    def __init__(self, opening: Coroutine[Any, Any, AsyncSession]) -> None:
        self._opening = opening
        self._session: AsyncSession | None = None

    def __await__(self) -> Generator[Any, None, AsyncSession]:
        return self._opening.__await__()

    async def __aenter__(self) -> AsyncSession:
        self._session = await self._opening
        return self._session

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        assert self._session is not None
        await self._session.__aexit__(exc_type, exc, tb)


class AsyncSession(SessionView):
    """One session; see `envscaler_client.Session`. As an async context manager, always closed."""

    def __init__(self, client: AsyncEnvClient, data: SessionData) -> None:
        super().__init__(data)
        self._client = client

    async def call(self, name: str, arguments: Mapping[str, Any] | str | None = None,
                   call_id: str | None = None, *, ordered: bool = False) -> CallResult:
        """Call a tool; see `envscaler_client.Session.call`. An ordered call is numbered when
        its coroutine starts, before its first ``await``: calls gathered at once are numbered in
        the order they were given."""
        request = _api.session_call(self._data, name, arguments, call_id, ordered)
        return await self._client._request(request)

    async def info(self) -> SessionInfo:
        return await self._client._request(_api.session_info(self.id))

    async def state(self) -> SessionState:
        return await self._client._request(_api.state(self.id))

    async def trajectory(self) -> Trajectory:
        return await self._client._request(_api.trajectory(self.id))

    async def reset(self, scenario: str | None = None, seed: int | None = None,
                    init_config: Mapping[str, Any] | None = None) -> ResetResult:
        """Back to the start of the scenario (or another one, a seed, an init_config)."""
        return await self._client._drive(_api.reset_flow(self._data, scenario, seed, init_config,
                                                         self._client.config.retry))

    async def validate(self) -> Validation:
        """Run the scenario's checks: ``reward`` = passed / total. Changes nothing."""
        return await self._client._request(_api.validate(self.id))

    async def fork(self, count: int = 1) -> list[AsyncSession]:
        """``count`` (1-64) new sessions at exactly this one's point; see `Session.fork`."""
        forked = await self._client._request(_api.fork(self.id, count))
        return [AsyncSession(self._client, SessionData.created(s)) for s in forked.sessions]

    async def snapshot(self) -> str:
        """Store this session's point; `AsyncEnvClient.open_snapshot` opens sessions there."""
        return (await self._client._request(_api.snapshot(self.id))).snapshot_id

    async def close(self) -> None:
        """End the session and its sandbox; does nothing the second time."""
        await self._client._drive(_api.close_flow(self._data, self._client.config.retry))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._client._drive(_api.close_flow(self._data, self._client.config.retry, exc))
