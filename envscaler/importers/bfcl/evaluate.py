"""`envscaler eval bfcl`: a model's answers to BFCL's multi-turn questions, scored as BFCL scores
them, through the gateway.

The answers come from a result file in BFCL's own format (what BFCL's generation writes: a line
per question with its ``id`` and ``result``, per turn a list of steps; other fields ignored) or
from an `envscaler rollout` file of imported BFCL scenarios (`rollout_answers`: each assistant
message a step, as a function-calling model's). The questions (initial configuration, classes,
ground truth) are read from the checkout; each is executed twice in its environment
(``bfcl-<classes>``, as `envscaler import bfcl` names them), once with the model's calls and once
with the ground truth's, in two gateway sessions (``envscaler.importers.bfcl.execution``), and judged by
BFCL's rules (``envscaler.importers.bfcl.checker``). A question that cannot be scored (unknown id, a
category not imported, an environment the gateway lacks) is reported with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from envscaler_client import AuthError, EnvClient, EnvScalerError, TransportError
from envscaler_client.rollout.episode import Episode
from pydantic import ValidationError

from envscaler.importers.bfcl.checker import Verdict, check, precheck
from envscaler.importers.bfcl.checkout import Checkout, CheckoutError, locate, numbered_json_lines
from envscaler.importers.bfcl.decode import DECODERS, FUNCTION_CALLING, PROMPTING
from envscaler.importers.bfcl.envcode import CONFIG_KEY
from envscaler.importers.bfcl.execution import SessionExecution, open_pair
from envscaler.importers.bfcl.importer import CATEGORIES, env_id

AUTO = "auto"
CATEGORY_PREFIX = "multi_turn_"
Progress = Callable[[int, int], None]
"""Called with the questions done and their total."""


class EvalError(Exception):
    """The scoring cannot run: a bad checkout or answers file."""


@dataclass(frozen=True)
class Question:
    """BFCL's record of a question: what both executions need."""

    id: str
    classes: list[str]
    initial_config: dict[str, Any]
    ground_truth: list[list[str]]

    @property
    def env(self) -> str:
        return env_id(tuple(sorted(self.classes)))

    @property
    def init_config(self) -> dict[str, Any]:
        """The session's start, as the importer writes a scenario's."""
        return {CONFIG_KEY: {name: self.initial_config.get(name, {})
                             for name in sorted(self.classes)}}


@dataclass
class EvalReport:
    source: str
    decoder: str
    gateway: str
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    not_scored: dict[str, str] = field(default_factory=dict)

    @property
    def accuracy(self) -> float | None:
        """Valid verdicts over scored questions (BFCL's accuracy when every one was scored)."""
        if not self.verdicts:
            return None
        return sum(verdict.valid for verdict in self.verdicts.values()) / len(self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "decoder": self.decoder, "gateway": self.gateway,
                "verdicts": {key: asdict(verdict) for key, verdict in self.verdicts.items()},
                "accuracy": self.accuracy, "scored": len(self.verdicts),
                "not_scored": self.not_scored}


def result_answers(path: Path) -> dict[str, Any]:
    """A BFCL result file: each question's ``result``, by id, in the file's order."""
    answers: dict[str, Any] = {}
    for number, record in _records(path):
        if not isinstance(record, dict) or not isinstance(record.get("id"), str) \
                or "result" not in record:
            raise EvalError(f"{path}:{number}: not a BFCL result (an object with id and result)")
        answers[record["id"]] = record["result"]
    return answers


def rollout_answers(path: Path) -> dict[str, Any]:
    """An `envscaler rollout` file as BFCL results, by scenario id: per user message of the
    episode, each assistant message after it as a step (its tool calls as ``{name: arguments}``,
    or its text), so a turn the episode never reached is missing, as in a BFCL result of a run
    that was cut short."""
    answers: dict[str, Any] = {}
    for number, record in _records(path):
        try:
            episode = Episode.model_validate(record)
        except ValidationError as exc:
            raise EvalError(f"{path}:{number}: not an episode of `envscaler rollout`: "
                            f"{exc.errors()[0]['msg']}") from None
        if episode.scenario is None:
            raise EvalError(f"{path}:{number}: the episode has no scenario")
        answers[episode.scenario] = _turns(episode.messages)
    return answers


def _turns(messages: list[dict[str, Any]]) -> list[list[Any]]:
    turns: list[list[Any]] = []
    for message in messages:
        if message.get("role") == "user":
            turns.append([])
        elif message.get("role") == "assistant" and turns:
            functions = [call.get("function") or {} for call in message.get("tool_calls") or []]
            turns[-1].append([{function.get("name", ""): function.get("arguments", "")}
                              for function in functions]
                             if functions else message.get("content") or "")
    return turns


def decoder_of(answers: dict[str, Any], decoder: str) -> str:
    """The decoder ``auto`` stands for: function calling when any step is a list or an object
    (a function-calling model's calls), else prompting (text only)."""
    if decoder != AUTO:
        if decoder not in DECODERS:
            raise EvalError(f"unknown decoder {decoder!r}: choose from {AUTO}, "
                            f"{', '.join(DECODERS)}")
        return decoder
    steps = (step for result in answers.values() if isinstance(result, list)
             for turn in result if isinstance(turn, list) for step in turn)
    return FUNCTION_CALLING if any(isinstance(step, (list, dict)) for step in steps) \
        else PROMPTING


def questions(root: Path, ids: list[str]) -> dict[str, Question]:
    """The checkout's questions among ``ids`` (of the categories the importer reads)."""
    try:
        checkout = locate(root)
    except CheckoutError as exc:
        raise EvalError(str(exc)) from exc
    wanted = {category for category in CATEGORIES
              if any(key.startswith(f"{CATEGORY_PREFIX}{category}_") for key in ids)}
    found: dict[str, Question] = {}
    for category in sorted(wanted):
        found |= _category(checkout, category)
    return found


def _category(checkout: Checkout, category: str) -> dict[str, Question]:
    try:
        records, answers = checkout.questions(category)
    except CheckoutError as exc:
        raise EvalError(str(exc)) from exc
    return {record["id"]: Question(record["id"], list(record.get("involved_classes") or []),
                                   record.get("initial_config") or {},
                                   answers.get(record["id"]) or [])
            for record in records if isinstance(record, dict) and "id" in record}


def score(client: EnvClient, answers: dict[str, Any], found: dict[str, Question],
          report: EvalReport, progress: Progress | None = None) -> EvalReport:
    """Each answered question's verdict (or why it was not scored) into ``report``. A transport
    or authentication failure of the gateway is raised as is."""
    decode = DECODERS[report.decoder]
    for done, (key, result) in enumerate(answers.items(), start=1):
        question = found.get(key)
        if question is None:
            report.not_scored[key] = ("no such question in the checkout's multi-turn "
                                      f"{' or '.join(CATEGORIES)} categories")
        else:
            try:
                report.verdicts[key] = _score(client, question, result, decode)
            except (TransportError, AuthError):
                raise
            except EnvScalerError as exc:
                report.not_scored[key] = f"the gateway failed it in {question.env}: {exc}"
        if progress is not None:
            progress(done, len(answers))
    return report


def _score(client: EnvClient, question: Question, result: Any,
           decode: Callable[[Any], list[str]]) -> Verdict:
    early = precheck(result, question.ground_truth)
    if early is not None:
        return early
    model, truth = open_pair(client, question.env, question.init_config)
    with model, truth:
        return check(result, question.ground_truth, decode,
                     SessionExecution(model, question.classes),
                     SessionExecution(truth, question.classes))


def _records(path: Path) -> list[tuple[int, Any]]:
    try:
        return numbered_json_lines(path)
    except CheckoutError as exc:
        raise EvalError(str(exc)) from None
