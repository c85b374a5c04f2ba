"""SkelBuilder step 3, quality evaluation: static gate, test configuration, executable gate, and
the dual-agent check (on by default when a model is configured; ``dual_check=False`` skips it).

The cheap gates go first, so that no model call or sandbox is spent on code that fails them.
"""

from __future__ import annotations

from typing import Any

from envscaler.synth.envcode import EnvCode, generate_config
from envscaler.synth.gates.executable import executable_gate, queries
from envscaler.synth.gates.static import static_gate
from envscaler.synth.llm import ItemDropped, TransientFailure
from envscaler.synth.prompts import quality as prompts
from envscaler.synth.run import Run
from envscaler.synth.sandboxes import INFRASTRUCTURE
from envscaler.synth.skel.dual import dual_check


async def evaluate(run: Run, envs: dict[str, dict[str, Any]], *,
                   dual: bool) -> dict[str, dict[str, Any]]:
    """The environments that pass every gate, each with its ``test_config`` and gate reports."""
    assert run.model is not None and run.hub is not None
    model, hub, settings = run.model, run.hub, run.settings

    async def static(item: str, env: dict[str, Any]) -> dict[str, Any]:
        result = static_gate(env["source"], env["class_name"])
        if not result.passed:
            raise ItemDropped(result.summary())
        return result.to_dict()

    statics = await run.stage("quality.static", [(env_id, _code(env).to_dict())
                                                 for env_id, env in envs.items()], static)

    async def config(item: str, code: dict[str, Any]) -> dict[str, Any]:
        answer = await generate_config(model, hub, EnvCode.from_dict(code), stage="quality.config",
                                       item=item, index=1, count=1,
                                       focus=prompts.CONFIG_FOCUS_TEST, seed=settings.seed)
        return {"init_config": answer.value}

    configs = await run.stage("quality.config", [(env_id, _code(envs[env_id]).to_dict())
                                                 for env_id in statics], config)

    async def executable(item: str, value: dict[str, Any]) -> dict[str, Any]:
        env = EnvCode.from_dict(value["env"])
        async with hub.sandbox(f"exec-{item}") as box:
            result = await executable_gate(box, source=env.source, class_name=env.class_name,
                                           tools=env.tools, init_config=value["init_config"],
                                           seed=settings.seed, limits=hub.limits,
                                           valid_cases=settings.exec_valid_cases,
                                           read_only=queries(value["operations"]))
        if any(problem.rule == INFRASTRUCTURE for problem in result.problems):
            raise TransientFailure(result.summary())
        if not result.passed:
            raise ItemDropped(result.summary())
        return {"calls": result.details.get("calls", 0)}

    executed = await run.stage("quality.executable", [
        (env_id, {"env": _code(envs[env_id]).to_dict(), "init_config": data["init_config"],
                  "operations": envs[env_id]["operations"]})
        for env_id, data in configs.items()], executable,
        concurrency=settings.sandbox_concurrency)

    duals: dict[str, Any] = {}
    if dual:
        async def dual_stage(item: str, value: dict[str, Any]) -> dict[str, Any]:
            env = EnvCode.from_dict(value["env"])
            async with hub.sandbox(f"dual-{item}") as box:
                return await dual_check(model, box, env, item=item,
                                        init_config=value["init_config"],
                                        rounds=settings.dual_rounds,
                                        threshold=settings.dual_threshold, seed=settings.seed,
                                        limits=hub.limits)

        duals = await run.stage("quality.dual", [
            (env_id, {"env": _code(envs[env_id]).to_dict(),
                      "init_config": configs[env_id]["init_config"]})
            for env_id in executed], dual_stage)
    passed = duals if dual else executed
    return {env_id: {**envs[env_id], "test_config": configs[env_id]["init_config"],
                     "quality": {"static": "passed", "executable": executed[env_id],
                                 **({"dual": _dual_summary(duals[env_id])} if dual else {})}}
            for env_id in passed}


def _code(env: dict[str, Any]) -> EnvCode:
    return EnvCode(env_id=env["env_id"], class_name=env["class_name"], summary=env["summary"],
                   introduction=env["introduction"], rules=list(env["state"]["rules"]),
                   source=env["source"], tools=env["tools"])


def _dual_summary(result: dict[str, Any]) -> dict[str, Any]:
    return {key: result[key] for key in ("pass", "warning", "fail", "skipped", "score")}
