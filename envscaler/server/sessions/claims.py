"""Sandboxes from the pools for sessions (the pool of the environment's image: its requirements'
when it has any): claimed, loaded with an environment's start, and given back or destroyed."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from envscaler.sandbox.errors import CallTimeout, CapacityExhausted, RuntimeFault, SandboxError, SandboxGone
from envscaler.sandbox.image_pools import ImagePools, RequirementsUnavailable
from envscaler.sandbox.sandbox import Sandbox
from envscaler.server.catalogue import Initial, ServedCatalogue, ServedEnv
from envscaler.server.errors import ApiError, env_load_failed, session_expired
from envscaler.server.metrics import Metrics
from envscaler.server import statesize
from envscaler.server.sessions import faults
from envscaler.server.sessions.faults import Step
from envscaler.server.sessions.locking import SessionLocks
from envscaler.server.settings import Settings
from envscaler.server.store import Record, SessionLock, SessionStore

log = logging.getLogger("envscaler.server.sessions")

PING_TIMEOUT = 2.0  # seconds a sandbox is given to answer a ping


async def epoch_start(store: SessionStore, record: Record, env: ServedEnv) -> Initial:
    """Where the record's current epoch started: its scenario's start (the catalogue's), or the
    caller's own ``init_config``, stored once for every session that starts from it."""
    if record.scenario is not None:
        return env.initial(record.scenario)
    if not record.init:
        return Initial("{}")
    text = await store.init_text(record.init)
    if text is None:
        raise session_expired(f"session {record.id} cannot be rebuilt: its init_config "
                              f"(sha256 {record.init}) is no longer stored")
    return Initial(text)


@dataclass
class SandboxClaims:
    """The pools' sandboxes, as sessions take and leave them."""

    settings: Settings
    catalogue: ServedCatalogue
    pools: ImagePools
    locks: SessionLocks
    metrics: Metrics

    def __post_init__(self) -> None:
        self.state_limit = statesize.state_limit(self.settings)

    def admit(self, initial: Initial) -> None:
        """413 when a session starting from ``initial`` could not fit in a sandbox."""
        statesize.refuse_too_large(initial.size, self.state_limit)

    async def claim(self, session_id: str, env: ServedEnv) -> Sandbox:
        """A sandbox of the pool of ``env``'s image (``EnvLoadFailed``: its requirements have
        none)."""
        try:
            pool = await self.pools.of(env.manifest.requirements)
        except RequirementsUnavailable as exc:
            raise env_load_failed(env.id, str(exc)) from exc
        try:
            return await pool.claim(session_id)
        except CapacityExhausted as exc:
            raise faults.api_error(exc, Step.CLAIM) from exc
        except SandboxError as exc:
            log.error("sandbox creation failed session=%s error=%s", session_id, exc)
            raise faults.api_error(exc, Step.CLAIM) from exc

    async def claim_loaded(
        self,
        session_id: str,
        env: ServedEnv,
        initial: Initial,
        seed: int,
        *,
        scenario_id: str | None,
        held: tuple[SessionLock, Record] | None = None,
    ) -> Sandbox:
        """Claim a sandbox and load ``env`` into it, from ``initial`` (``scenario_id`` None: the
        caller's own ``init_config``). A sandbox that dies under the load (the
        engine, the kernel's OOM killer or gVisor's Sentry ended it after its claim) is replaced
        once. ``held``: the session's lock, renewed after each claim (a cold start may take a
        while). A sandbox claimed here and not returned is destroyed, whatever failed (the
        renewal, the load, a cancellation): no one else knows of it. A start too large for the
        sandbox is refused before any is claimed."""
        self.admit(initial)
        for attempt in (1, 2):
            sandbox = await self.claim(session_id, env)
            try:
                if held is not None:
                    await self.locks.renew(*held)
                await self._load(sandbox, env, initial, seed, scenario_id)
                return sandbox
            except SandboxGone as exc:
                await self.destroy_quietly(sandbox)
                faults.counted(exc, self.metrics)
                log.warning("sandbox died while loading session=%s env=%s attempt=%d error=%s",
                            session_id, env.id, attempt, exc)
                if attempt == 2:
                    raise faults.api_error(exc, Step.LOAD, env=env.id) from exc
            except BaseException:
                await self.destroy_quietly(sandbox)
                raise
        raise AssertionError("unreachable")

    async def _load(
        self, sandbox: Sandbox, env: ServedEnv, initial: Initial, seed: int,
        scenario_id: str | None,
    ) -> None:
        """Load ``env`` into a fresh sandbox; on failure raise ApiError (``SandboxGone``: it
        died meanwhile, for `claim_loaded` to replace it)."""
        try:
            await sandbox.load(
                source=env.source,
                class_name=env.class_name,
                tools=env.tool_names,
                init_config=initial.text,
                init_patch=initial.patch,
                seed=seed,
                max_result_bytes=self.settings.max_result_bytes,
                max_state_bytes=self.settings.max_state_bytes,
                timeout=statesize.load_timeout(self.settings, initial.size),
                clock_start=env.clock_start(scenario_id),
            )
        except (RuntimeFault, CallTimeout) as exc:
            faults.counted(exc, self.metrics)
            raise faults.api_error(exc, Step.LOAD, env=env.id,
                                   custom=scenario_id is None) from exc

    async def release_quietly(self, sandbox: Sandbox, env_id: str) -> None:
        """End the sandbox a record of ``env_id`` names: recycled into our pool of its image
        (whoever created it), or destroyed."""
        try:
            pool = await self.pools.of(self.catalogue.env(env_id).manifest.requirements)
        except (ApiError, RequirementsUnavailable):  # no longer in the catalogue, or no image
            await self.destroy_quietly(sandbox)
            return
        try:
            await pool.release(sandbox)
        except Exception as exc:  # noqa: BLE001 - best effort; reapers remove what is left
            log.warning("sandbox release failed sandbox=%s error=%s", sandbox.id[:12], exc)

    async def destroy_quietly(self, sandbox: Sandbox) -> None:
        try:
            await sandbox.destroy()
        except Exception as exc:  # noqa: BLE001 - best effort; reapers remove what is left
            log.warning("sandbox destroy failed sandbox=%s error=%s", sandbox.id[:12], exc)
