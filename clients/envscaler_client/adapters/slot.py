"""One session moved from episode to episode: the rollout slot of the trainer adapters.

A trainer keeps an environment object per concurrent rollout and starts each rollout with a
reset. The slot opens a session on the first episode and moves it to the next ones in place
(the gateway resets the sandbox, 3 ms rather than a new session's 13 ms), opening a new one when
the gateway ended the old one meanwhile (closed, expired); it closes the session when closed
itself or collected.
"""

from __future__ import annotations

import logging
import weakref

from envscaler_client.adapters.rows import Episode
from envscaler_client.client import EnvClient, Session
from envscaler_client.errors import EnvScalerError, NotFoundError, SessionClosedError

log = logging.getLogger(__name__)

SESSION_GONE = frozenset({"SessionClosed", "SessionExpired", "UnknownSession"})
"""What a reset may meet when the gateway ended the session between rollouts: open a new one."""


class SessionSlot:
    """The session of one rollout slot on ``client``'s gateway."""

    def __init__(self, client: EnvClient) -> None:
        self.client = client
        self.session: Session | None = None
        self._held: list[Session] = []  # the open session, shared with the finalizer (not self)
        self._finalizer = weakref.finalize(self, _close, client, self._held)

    def move_to(self, episode: Episode) -> Session:
        """The slot's session, at the episode's scenario and seed."""
        session = self.session
        if session is not None:
            try:
                session.reset(episode.scenario, seed=episode.seed)
                return session
            except (SessionClosedError, NotFoundError) as exc:
                if exc.type not in SESSION_GONE:
                    raise
        session = self.client.create_session(episode.env, episode.scenario, seed=episode.seed)
        self._held[:] = [session]
        self.session = session
        return session

    def current(self, owner: str) -> Session:
        """The open session; ``owner`` names the adapter in the error when none was opened."""
        if self.session is None:
            raise RuntimeError(f"{owner}: reset must start a rollout first")
        return self.session

    def close(self) -> None:
        """Close the session and the client now rather than when the slot is collected."""
        self._finalizer()


def _close(client: EnvClient, held: list[Session]) -> None:
    """End the slot's session and connections. A gateway that is gone by then is logged, not
    raised: the session expires on its own."""
    try:
        for session in held:
            session.close()
    except EnvScalerError as exc:
        log.warning("could not close session %s: %s", held[0].id, exc)
    finally:
        client.close()
