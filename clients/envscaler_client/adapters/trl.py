"""TRL's ``environment_factory``: a class per environment whose public methods are its tools.

    from envscaler_client.adapters.trl import environment_factory
    from envscaler_client.adapters.rows import scenario_rows

    rows = scenario_rows("library_loans", split="train")
    trainer = GRPOTrainer(model=..., train_dataset=Dataset.from_list(rows), args=...,
                          environment_factory=environment_factory("library_loans"))

The contract, as ``GRPOTrainer`` (TRL 1.16) uses it: it calls the factory with no argument, once
per concurrent rollout, and keeps the instances for later batches; the class's public functions
(``inspect.getmembers(type(instance), inspect.isfunction)``) other than ``reset`` and
``get_reward`` are the tools, whose schemas transformers' ``get_json_schema`` reads from their
signatures and Google-style docstrings; ``reset(**row)`` starts each rollout with the dataset row
and may return text to append to the prompt; a tool's return value is shown to the model with
``str()``, and an exception as ``{"error": str(exc)}``; ``get_reward()`` scores the rollout.

Each instance holds one session, opened by its first ``reset`` and moved to the next row's
scenario and seed by later ones (the sandbox is reset in place). ``get_reward`` validates it.
"""

from __future__ import annotations

import itertools
import logging
import weakref
from typing import Any, ClassVar, Self

from envscaler_client._protocol import connection_limits
from envscaler_client.client import EnvClient, Session
from envscaler_client.errors import EnvScalerError, NotFoundError, SessionClosedError
from envscaler_client.adapters.rows import Episode, gateway
from envscaler_client.adapters.signatures import tool_method
from envscaler_client.tools import tool_message

log = logging.getLogger(__name__)

SESSION_GONE = frozenset({"SessionClosed", "SessionExpired", "UnknownSession"})
"""What a reset may meet when the gateway ended the session between batches: open a new one."""
RESERVED = ("reset", "get_reward")
"""Names TRL gives a meaning of its own; a tool so named could not be exposed as a tool."""


class EnvScalerEnvironment:
    """One rollout slot of GRPOTrainer: a session of `env`, moved from row to row by `reset`.

    Subclasses made by `environment_factory` add one method per tool. Everything else here is
    private, since TRL would expose any other public function as a tool.
    """

    env: ClassVar[str]
    _gateway: ClassVar[tuple[str, str | None]]

    def __init__(self) -> None:
        self._client = EnvClient(*self._gateway, limits=connection_limits(1))  # one session
        self._session: Session | None = None
        self._slot: list[Session] = []  # the open session, shared with the finalizer (not self)
        self._calls = itertools.count()
        self._finalizer = weakref.finalize(self, _close, self._client, self._slot)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the session now rather than when the instance is collected."""
        self._finalizer()

    def reset(self, **row: Any) -> str | None:
        """Move to the row's scenario and seed (``env``, ``scenario``, ``seed``), opening the
        session on first use or when the gateway ended it (expired, closed). Returns the task
        when the row has no ``prompt`` of its own, for TRL to append to the prompt."""
        episode = Episode.from_row(row)
        if episode.env != self.env:
            raise ValueError(f"this environment class serves {self.env!r}, but the row names "
                             f"{episode.env!r}: pass a dict of factories for several environments")
        session = self._session
        if session is not None:
            try:
                session.reset(episode.scenario, seed=episode.seed)
            except (SessionClosedError, NotFoundError) as exc:
                if exc.type not in SESSION_GONE:
                    raise
                session = None
        if session is None:
            session = self._client.create_session(self.env, episode.scenario, seed=episode.seed)
            self._slot[:] = [session]
            self._session = session
        return None if "prompt" in row else session.task

    def get_reward(self) -> float:
        """The scenario's checks on the session's state: passed / total."""
        return self._open_session().validate().reward

    def _open_session(self) -> Session:
        if self._session is None:
            raise RuntimeError(f"{type(self).__name__}: reset(**row) must start a rollout first")
        return self._session

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        """Run the tool; its result (or a correctable error) as the JSON text the model reads."""
        call = {"id": f"trl-{next(self._calls)}", "type": "function",
                "function": {"name": name, "arguments": arguments}}
        return tool_message(self._open_session(), call)["content"]


def _close(client: EnvClient, slot: list[Session]) -> None:
    """End the instance's session and connections when TRL drops it (or at exit). A gateway
    that is gone by then is logged, not raised: the session expires on its own."""
    try:
        for session in slot:
            session.close()
    except EnvScalerError as exc:
        log.warning("could not close session %s: %s", slot[0].id, exc)
    finally:
        client.close()


def _run(instance: EnvScalerEnvironment, name: str, arguments: dict[str, Any]) -> str:
    return instance._call(name, arguments)


def environment_factory(env: str, *, url: str | None = None,
                        api_key: str | None = None) -> type[EnvScalerEnvironment]:
    """A class for ``GRPOTrainer(environment_factory=...)`` serving ``env``'s tools.

    ``url`` / ``api_key`` default to ``ENVSCALER_URL`` / ``ENVSCALER_API_KEY``. The tools are
    read once, here, from the gateway (``GET /v1/envs/{env}``: the tools every session of ``env``
    has)."""
    where = gateway(url, api_key)
    with EnvClient(*where) as client:
        tools = client.env(env).tools
    clashes = [tool["function"]["name"] for tool in tools
               if tool["function"]["name"] in RESERVED or tool["function"]["name"].startswith("_")]
    if clashes:
        raise ValueError(f"{env}: TRL cannot expose tools named {clashes} (it reserves "
                         f"{', '.join(RESERVED)} and hides names starting with '_')")
    methods = {tool["function"]["name"]: tool_method(tool, _run) for tool in tools}
    name = "".join(part.title() for part in env.split("_")) + "Environment"
    return type(name, (EnvScalerEnvironment,),
                {"env": env, "_gateway": where, "__doc__": f"The {env} environment's tools, "
                 "served by an EnvScaler gateway.", "__module__": __name__, **methods})


def environment_factories(envs: list[str], *, url: str | None = None,
                          api_key: str | None = None) -> dict[str, type[EnvScalerEnvironment]]:
    """``{env: class}`` for a run mixing environments: TRL then picks each row's class by its
    ``environment`` field, which `rows_for_factories` sets."""
    return {env: environment_factory(env, url=url, api_key=api_key) for env in envs}


def rows_for_factories(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with the ``environment`` field a dict of factories routes by (their ``env``)."""
    return [{**row, "environment": Episode.from_row(row).env} for row in rows]
