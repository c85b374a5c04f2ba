"""The paper's dual-agent check: a testing agent calls tools, a checking agent judges each call.

Per round, the tester picks one call from the environment's description, tools, the running
tally and the current state; the call runs in the sandbox with the state taken before and after;
the checker sees the tool's source, the state before, the result and the diff, and says pass,
warning or fail. The environment is kept when (pass + warning) / judged >= the threshold
(0.85 by default, 30 rounds). A round whose agent gives no usable reply is skipped, not counted;
when fewer than half the rounds could be judged the environment is dropped.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from envscaler.sandbox.errors import CallTimeout, RuntimeFault, SandboxError
from envscaler.sandbox.sandbox import Sandbox
from envscaler.synth.codeinfo import method_source
from envscaler.synth.diff import diff_text, state_diff
from envscaler.synth.envcode import EnvCode, describe_tools, state_json
from envscaler.synth.llm import ItemDropped, ModelClient, ParseError, TransientFailure
from envscaler.synth.parsing import json_reply
from envscaler.synth.prompts import messages
from envscaler.synth.prompts import quality as prompts
from envscaler.synth.sandboxes import Limits, is_infrastructure_fault
from envscaler.synth.skel.models import CallChoice, CheckerVerdict

MAX_OBSERVATION_CHARS = 4000
VERDICTS = ("pass", "warning", "fail")


async def dual_check(model: ModelClient, sandbox: Sandbox, env: EnvCode, *, item: str,
                     init_config: dict[str, Any], rounds: int, threshold: float, seed: int,
                     limits: Limits) -> dict[str, Any]:
    """The rounds and the score; raises ItemDropped when the environment does not pass."""
    try:
        await sandbox.load(source=env.source, class_name=env.class_name, tools=env.tool_names,
                           init_config=init_config, seed=seed,
                           max_result_bytes=limits.max_result_bytes, timeout=limits.load_timeout)
    except RuntimeFault as exc:
        if is_infrastructure_fault(exc.kind):
            raise TransientFailure(f"dual check: sandbox runtime failure: {exc}") from None
        raise ItemDropped(f"dual check: does not load: {exc.message}") from None
    tally: dict[str, Counter[str]] = {name: Counter() for name in env.tool_names}
    log: list[dict[str, Any]] = []
    tools_text = describe_tools(env.tools)
    for number in range(1, rounds + 1):
        entry = await _round(model, sandbox, env, item, number, rounds, tally, tools_text, limits)
        log.append(entry)
        if entry.get("verdict") in VERDICTS:
            tally[entry["tool"]][entry["verdict"]] += 1
    counts = Counter(entry.get("verdict") for entry in log)
    judged = sum(counts[verdict] for verdict in VERDICTS)
    score = (counts["pass"] + counts["warning"]) / judged if judged else 0.0
    result = {"rounds": log, "pass": counts["pass"], "warning": counts["warning"],
              "fail": counts["fail"], "skipped": rounds - judged, "score": round(score, 4)}
    if judged * 2 < rounds:
        raise ItemDropped(f"dual check: only {judged} of {rounds} rounds could be judged")
    if score < threshold:
        fails = [f"{entry['tool']}: {entry['reason']}" for entry in log
                 if entry.get("verdict") == "fail"][:3]
        raise ItemDropped(f"dual check: (pass + warning) / judged = {score:.2f} < {threshold:g} "
                          f"({counts['fail']} fail); e.g. {'; '.join(fails)}")
    return result


async def _round(model: ModelClient, sandbox: Sandbox, env: EnvCode, item: str, number: int,
                 rounds: int, tally: dict[str, Counter[str]], tools_text: str,
                 limits: Limits) -> dict[str, Any]:
    before = await sandbox.state(timeout=limits.call_timeout)
    coverage = "\n".join(
        f"- {name}: {sum(counts.values())} calls, {counts['pass']}/{counts['warning']}/"
        f"{counts['fail']}" for name, counts in tally.items())

    def parse_choice(text: str) -> CallChoice:
        choice = json_reply(text, CallChoice)
        if choice.tool not in tally:
            raise ParseError(f"{choice.tool!r} is not a tool; choose one of {', '.join(tally)}")
        return choice

    prefix = f"{item}/round-{number:02d}"
    try:
        choice = (await model.ask("quality.dual.tester", f"{prefix}/tester", messages(
            prompts.TESTER_SYSTEM, prompts.TESTER_USER, summary=env.summary,
            introduction=env.introduction, tools=tools_text, coverage=coverage,
            state=state_json(before), round=number, rounds=rounds), parse_choice)).value
    except ItemDropped as exc:
        return {"round": number, "skipped": f"tester: {exc}"}
    try:
        observation: Any = await sandbox.call(choice.tool, choice.arguments,
                                              timeout=limits.call_timeout)
    except RuntimeFault as exc:
        if is_infrastructure_fault(exc.kind):
            raise TransientFailure(f"dual check: sandbox runtime failure: {exc}") from None
        observation = {"runtime_error": exc.kind, "message": exc.message}
    except CallTimeout as exc:
        raise ItemDropped(f"dual check: {choice.tool} exceeded its deadline: {exc}") from None
    except SandboxError as exc:
        raise ItemDropped(f"dual check: the sandbox died during {choice.tool}: {exc}") from None
    after = await sandbox.state(timeout=limits.call_timeout)
    changes = state_diff(before, after)
    observation_text = json.dumps(observation, sort_keys=True, ensure_ascii=False)
    if len(observation_text) > MAX_OBSERVATION_CHARS:
        observation_text = observation_text[:MAX_OBSERVATION_CHARS] + " ..."
    entry: dict[str, Any] = {"round": number, "tool": choice.tool, "arguments": choice.arguments,
                             "case": choice.case, "purpose": choice.purpose,
                             "observation": observation, "diff": changes}
    try:
        verdict = (await model.ask("quality.dual.checker", f"{prefix}/checker", messages(
            prompts.CHECKER_SYSTEM, prompts.CHECKER_USER, summary=env.summary,
            rules="\n".join(f"- {rule}" for rule in env.rules) or "- (none)",
            method=method_source(env.source, env.class_name, choice.tool).strip(),
            tool=choice.tool, arguments=json.dumps(choice.arguments, sort_keys=True),
            case=choice.case, purpose=choice.purpose or "-", state_before=state_json(before),
            observation=observation_text, diff=diff_text(changes)),
            lambda text: json_reply(text, CheckerVerdict))).value
    except ItemDropped as exc:
        entry["skipped"] = f"checker: {exc}"
        return entry
    entry["verdict"] = verdict.verdict
    entry["reason"] = verdict.reason
    return entry
