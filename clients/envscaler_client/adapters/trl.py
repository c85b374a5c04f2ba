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
from typing import Any, ClassVar, Self

from envscaler_client._protocol import connection_limits
from envscaler_client.client import EnvClient, Session
from envscaler_client.adapters.rows import Episode, gateway
from envscaler_client.adapters.signatures import tool_method
from envscaler_client.adapters.slot import SessionSlot
from envscaler_client.tools import tool_message


class EnvScalerEnvironment:
    """One rollout slot of GRPOTrainer: a session of `env`, moved from row to row by `reset`.

    Subclasses made by `environment_factory` add one method per tool. Everything else here is
    private, since TRL would expose any other public function as a tool, and no tool may take
    the name of anything here (`reserved_names`): a method so named would replace it.
    """

    _env: ClassVar[str]
    _gateway: ClassVar[tuple[str, str | None]]

    def __init__(self) -> None:
        # one session at a time, so one connection
        self._slot = SessionSlot(EnvClient(*self._gateway, limits=connection_limits(1)))
        self._calls = itertools.count()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the session now rather than when the instance is collected."""
        self._slot.close()

    def reset(self, **row: Any) -> str | None:
        """Move to the row's scenario and seed (``env``, ``scenario``, ``seed``), opening the
        session on first use or when the gateway ended it (expired, closed). Returns the task
        when the row has no ``prompt`` of its own, for TRL to append to the prompt."""
        episode = Episode.from_row(row)
        if episode.env != self._env:
            raise ValueError(f"this environment class serves {self._env!r}, but the row names "
                             f"{episode.env!r}: pass a dict of factories for several environments")
        session = self._slot.move_to(episode)
        return None if "prompt" in row else session.task

    def get_reward(self) -> float:
        """The scenario's checks on the session's state: passed / total."""
        return self._open_session().validate().reward

    def _open_session(self) -> Session:
        return self._slot.current(f"{type(self).__name__} (reset(**row))")

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        """Run the tool; its result (or a correctable error) as the JSON text the model reads."""
        call = {"id": f"trl-{next(self._calls)}", "type": "function",
                "function": {"name": name, "arguments": arguments}}
        return tool_message(self._open_session(), call)["content"]


def _run(instance: EnvScalerEnvironment, name: str, arguments: dict[str, Any]) -> str:
    return instance._call(name, arguments)


def reserved_names() -> frozenset[str]:
    """Every name a tool method would shadow: the base class's attributes and annotations
    (``reset`` and ``get_reward``, which TRL calls itself, and the private ones)."""
    return frozenset(dir(EnvScalerEnvironment)) | frozenset(
        EnvScalerEnvironment.__annotations__)


def environment_class(env: str, tools: list[dict[str, Any]],
                      where: tuple[str, str | None]) -> type[EnvScalerEnvironment]:
    """The class serving ``tools`` (OpenAI function format) of ``env`` through the gateway
    ``where``. A tool named like an attribute of the class, or starting with ``_`` (which TRL
    does not list), is refused with `ValueError`, never renamed: a renamed tool would not be
    the one the environment's task and checks speak of."""
    reserved = reserved_names()
    clashes = [tool["function"]["name"] for tool in tools
               if tool["function"]["name"] in reserved or tool["function"]["name"].startswith("_")]
    if clashes:
        public = ", ".join(sorted(name for name in reserved if not name.startswith("_")))
        raise ValueError(f"{env}: TRL cannot expose tools named {clashes}: the environment "
                         f"class reserves {public} and every name starting with '_'")
    methods = {tool["function"]["name"]: tool_method(tool, _run) for tool in tools}
    name = "".join(part.title() for part in env.split("_")) + "Environment"
    return type(name, (EnvScalerEnvironment,),
                {"_env": env, "_gateway": where, "__doc__": f"The {env} environment's tools, "
                 "served by an EnvScaler gateway.", "__module__": __name__, **methods})


def environment_factory(env: str, *, url: str | None = None,
                        api_key: str | None = None) -> type[EnvScalerEnvironment]:
    """A class for ``GRPOTrainer(environment_factory=...)`` serving ``env``'s tools.

    ``url`` / ``api_key`` default to ``ENVSCALER_URL`` / ``ENVSCALER_API_KEY``. The tools are
    read once, here, from the gateway (``GET /v1/envs/{env}``: the tools every session of ``env``
    has)."""
    where = gateway(url, api_key)
    with EnvClient(*where) as client:
        tools = client.env(env).tools
    return environment_class(env, tools, where)


def environment_factories(envs: list[str], *, url: str | None = None,
                          api_key: str | None = None) -> dict[str, type[EnvScalerEnvironment]]:
    """``{env: class}`` for a run mixing environments: TRL then picks each row's class by its
    ``environment`` field, which `rows_for_factories` sets."""
    return {env: environment_factory(env, url=url, api_key=api_key) for env in envs}


def rows_for_factories(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with the ``environment`` field a dict of factories routes by (their ``env``)."""
    return [{**row, "environment": Episode.from_row(row).env} for row in rows]
