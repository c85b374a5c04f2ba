"""The whole client surface, sync and async, against a live gateway (uvicorn, Redis, Docker)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from envscaler_client import AsyncEnvClient, AuthError, EnvClient

from tests.integration.gateway_fixtures import COUNTER, COUNTER_SCENARIOS, LIBRARY
from tests.integration.live_gateway import *  # the fixtures: catalogue_root, live_gateway
from tests.integration.live_gateway import LiveGateway

TASKS = {scenario["id"]: scenario["task"] for scenario in COUNTER_SCENARIOS}


@pytest.fixture
def client(live_gateway: LiveGateway) -> Iterator[EnvClient]:
    with EnvClient(live_gateway.url, live_gateway.api_key) as client:
        yield client


@pytest.fixture
async def aclient(live_gateway: LiveGateway) -> AsyncIterator[AsyncEnvClient]:
    async with AsyncEnvClient(live_gateway.url, live_gateway.api_key) as client:
        yield client


def tool_names(tools: list[dict]) -> list[str]:  # type: ignore[type-arg]
    return [tool["function"]["name"] for tool in tools]


def test_gateway_and_catalogue(client: EnvClient) -> None:
    assert client.health().ok
    readiness = client.ready()
    assert readiness.ready and readiness.isolation == "container"
    assert readiness.components["redis"].ok and readiness.components["sandbox_backend"].ok

    envs = {env.id: env for env in client.envs()}
    assert set(envs) == {COUNTER, LIBRARY}
    assert envs[COUNTER].scenarios == len(COUNTER_SCENARIOS) and envs[COUNTER].tools == 7

    detail = client.env(COUNTER)
    assert detail.class_name == "CounterLab" and detail.scenarios == len(COUNTER_SCENARIOS)
    assert "increment" in tool_names(detail.tools)
    assert all(tool["type"] == "function" and "parameters" in tool["function"]
               for tool in detail.tools)

    assert [(s.id, s.split, s.task) for s in client.scenarios(COUNTER)] == \
        [(s["id"], s["split"], s["task"]) for s in COUNTER_SCENARIOS]
    assert [s.id for s in client.scenarios(COUNTER, split="eval")] == ["counter-2"]


def test_a_whole_session(client: EnvClient) -> None:
    with client.create_session(COUNTER, scenario="counter-1", seed=5) as session:
        assert (session.env, session.scenario, session.seed,
                session.task) == (COUNTER, "counter-1", 5, TASKS["counter-1"])
        assert session.agent_token and session.agent_token.startswith(session.id + ".")
        assert tool_names(session.tools) == tool_names(client.env(COUNTER).tools)

        first = session.call("increment", {"name": "a", "by": 2})
        assert first.ok and first.result["data"] == {"name": "a", "before": 1, "value": 3}
        assert first.index == 0 and not first.duplicate and first.call_id and len(
            first.call_id) == 32

        second = session.call("increment", '{"name": "b"}', call_id="my-call")
        again = session.call("increment", '{"name": "b"}', call_id="my-call")
        assert second.call_id == "my-call" and not second.duplicate
        assert again.duplicate and again.index == second.index and again.result == second.result

        failed = session.call("explode",
                              {"message": "boom"})  # a tool failure is a result, not an exception
        assert not failed.ok and failed.error is not None
        assert failed.error.type == "ToolException" and "boom" in failed.error.message

        state = session.state()
        assert state.state["counters"] == {"a": 3, "b": 1} and state.step == 3
        info = session.info()
        assert (info.status, info.step, info.calls, info.epoch) == ("active", 3, 3, 0)
        assert [entry.name
                for entry in session.trajectory().calls] == ["increment", "increment", "explode"]

        validation = session.validate()
        assert (validation.reward, validation.passed, validation.total) == (1.0, 2, 2)
        assert all(check.passed for check in validation.checks)

        reset = session.reset(scenario="counter-2", seed=9)
        assert (reset.epoch, reset.scenario, reset.seed) == (1, "counter-2", 9)
        assert (session.scenario, session.seed, session.task) == ("counter-2", 9,
                                                                  TASKS["counter-2"])
        assert session.state().state["counters"] == {"z": 10}
        assert session.validate().reward == 0.0
        kinds = [entry.kind for entry in session.trajectory().entries]
        assert kinds == ["call", "call", "call", "reset"]
    assert session.closed
    session.close()  # idempotent
    assert client.session(session.id).closed
    assert session.info().status == "closed"


def test_custom_initial_state(client: EnvClient) -> None:
    with client.create_session(COUNTER, init_config={"counters": {"q": 41}}) as session:
        assert session.task is None and session.scenario is None
        assert session.call("increment", {"name": "q"}).result["data"]["value"] == 42
        session.reset()
        assert session.state().state["counters"] == {"q": 41}


def test_attach_with_the_api_key_or_the_agent_token(
        client: EnvClient, live_gateway: LiveGateway) -> None:
    with client.create_session(COUNTER, "counter-1") as session:
        attached = client.session(session.id)
        assert (attached.env, attached.scenario, attached.seed, attached.task) == \
            (COUNTER, "counter-1", 0, TASKS["counter-1"])
        assert attached.tools == session.tools and attached.agent_token is None
        assert not attached.closed
        assert attached.call("increment", {"name": "a"}).ok

        with EnvClient(
                live_gateway.url) as agent_side:  # no API key: the agent holds only its token
            agent = agent_side.session(session.id, agent_token=session.agent_token)
            assert agent.tools == session.tools and agent.task is None
            assert agent.call("increment", {"name": "a"}).result["data"]["value"] == 3
            with pytest.raises(AuthError):
                agent.state()
        assert session.state().state["counters"]["a"] == 3


def test_a_session_is_closed_when_its_block_fails(client: EnvClient) -> None:
    with pytest.raises(RuntimeError, match="worker failed"), \
            client.create_session(COUNTER, "counter-1") as session:
        session.call("increment", {"name": "a"})
        raise RuntimeError("worker failed")
    assert session.closed and session.info().status == "closed"


async def test_the_async_client(aclient: AsyncEnvClient) -> None:
    assert (await aclient.health()).ok and (await aclient.ready()).ready
    assert {env.id for env in await aclient.envs()} == {COUNTER, LIBRARY}
    assert (await aclient.env(LIBRARY)).class_name == "LibraryLoanSystem"
    assert [s.id for s in await aclient.scenarios(COUNTER, split="rl")] == ["counter-1"]

    async with aclient.create_session(COUNTER, "counter-1", seed=2) as session:
        assert session.task == TASKS["counter-1"] and session.seed == 2
        assert (await session.call("increment", {"name": "a", "by": 2})).ok
        assert (await session.call("increment", '{"name": "b"}',
                                   call_id="async-call")).call_id == "async-call"
        assert (await session.call("increment", '{"name": "b"}', call_id="async-call")).duplicate
        assert (await session.state()).state["counters"] == {"a": 3, "b": 1}
        assert len((await session.trajectory()).calls) == 2
        assert (await session.info()).step == 2
        assert (await session.validate()).reward == 1.0
        assert (await session.reset(seed=4)).epoch == 1 and session.seed == 4
        assert (await session.validate()).reward == 0.0
        attached = await aclient.session(session.id)
        assert attached.task == session.task and attached.scenario == "counter-1"
    assert session.closed and (await session.info()).status == "closed"

    awaited = await aclient.create_session(COUNTER, init_config={"counters": {}})
    assert (await awaited.call("increment", {"name": "n"})).result["data"]["value"] == 1
    await awaited.close()
    await awaited.close()
    assert awaited.closed and (await awaited.info()).status == "closed"

    with pytest.raises(RuntimeError):
        async with aclient.create_session(COUNTER, "counter-2") as failing:
            raise RuntimeError("worker failed")
    assert (await failing.info()).status == "closed"


def test_fork_and_snapshot(client: EnvClient) -> None:
    with client.create_session(COUNTER, scenario="counter-1", seed=2) as session:
        session.call("increment", {"name": "a"})
        forks = session.fork(2)
        snapshot_id = session.snapshot()
        with client.open_snapshot(snapshot_id) as opened:
            expected = session.call("token").result
            for copy in (*forks, opened):
                assert (copy.scenario, copy.task, copy.seed) == ("counter-1", TASKS["counter-1"], 2)
                assert copy.agent_token.startswith(copy.id + ".")
                assert copy.call("token").result == expected
                assert copy.info().step == 2
        for fork in forks:
            fork.close()
            assert fork.closed


async def test_the_async_client_forks(aclient: AsyncEnvClient) -> None:
    async with aclient.create_session(COUNTER, scenario="counter-2") as session:
        await session.call("increment", {"name": "z"})
        forks = await session.fork(3)
        assert [(await fork.validate()).reward for fork in forks] == [1.0] * 3
        async with aclient.open_snapshot(await session.snapshot()) as opened:
            assert (await opened.validate()).reward == 1.0
        for fork in forks:
            await fork.close()
