"""The system prompts: the agent's (per mode) and the simulated user's.

They follow the paper's (EnvScaler §4: the environment's introduction and rules in the agent's
system prompt; a user who reveals the task step by step, keeps its keywords verbatim, invents
nothing, answers in ``# Thought`` / ``# Reply`` form and ends with ``###STOP###``) in our own
words. The tools are not in the prompt: they go in the request's ``tools`` (function calling).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NON_CONVERSATION = "non-conversation"
CONVERSATION = "conversation"
MODES = (NON_CONVERSATION, CONVERSATION)
DEFAULT_MAX_STEPS = {NON_CONVERSATION: 30, CONVERSATION: 40}
"""Agent turns per episode, as in the paper."""
STOP_SIGNAL = "###STOP###"
USER_OPENING = "Hello! How can I help you today?"
"""The agent's greeting that opens the simulated user's side of a conversation."""
TAU_USER_OPENING = "Hi! How can I help you today?"
"""tau-bench's greeting that opens its simulated user's side."""

_AGENT_COMMON = """\
# How to work
- The tools are the only way to read or change the environment. Look up what you need before \
changing anything, and never invent ids, names or values.
- You may call several tools in one turn; they run in the order you give them.
- A tool result with an "error" means the call did not do what you intended: read the error, \
correct the call and go on."""

_AGENT_NON_CONVERSATION = """\
- The user's task is in the first message, and the user will not answer questions. Complete \
all of it with the tools.
- When the task is done, or cannot be done, reply without calling a tool: say what you did \
and whether the task is completed. That reply ends the session."""

_AGENT_CONVERSATION = """\
- You are talking with a user who tells you what they need, possibly over several messages. \
To ask the user something or to report back, reply without calling a tool; the user then \
answers.
- Do what the user asks with the tools, confirm what you did, and ask when something you \
need is missing."""

_USER = """\
You are a user talking to a customer-service agent, who operates a system on your behalf \
with tools you cannot see. Your goal is this task:

<task>
{task}
</task>

Rules:
- Reveal the task gradually: start with the first thing you need and give further requests \
and details only when the previous part is done or the agent asks for them.
- Keep names, ids, numbers, dates and other keywords exactly as they are written in the task.
- Never invent information the task does not contain; if the agent asks for something you do \
not know, say so.
- You are the user, not the agent: do not do the agent's work or explain how to do it.
- When everything in the task has been done, or the agent clearly cannot do it, your reply is \
{stop} and nothing else.

Answer every message in exactly this format:
# Thought
(what you think about the agent's last message and what to say next; the agent does not see it)
# Reply
(the message the agent sees)"""


def _rules(rules: Any) -> str:
    if not rules:
        return ""
    if isinstance(rules, str):
        return rules.strip()
    if isinstance(rules, Mapping):
        return "\n".join(f"- {key}: {value}" for key, value in rules.items())
    return "\n".join(f"- {rule if isinstance(rule, str) else rule!r}" for rule in rules)


def agent_system_prompt(introduction: str, constraint_rules: Any = None,
                        mode: str = NON_CONVERSATION) -> str:
    """The agent's system prompt: its role, the environment's introduction and rules, and how
    the episode goes in ``mode``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    parts = ["You are an agent that operates a software environment through its tools on "
             "behalf of a user.", "# The environment\n" + introduction.strip()]
    rules = _rules(constraint_rules)
    if rules:
        parts.append("# Rules the environment enforces\n" + rules)
    parts.append(_AGENT_COMMON + "\n" + (_AGENT_NON_CONVERSATION if mode == NON_CONVERSATION
                                         else _AGENT_CONVERSATION))
    return "\n\n".join(parts)


_TAU_USER = """You are a user interacting with an agent.

Instruction: {task}

Rules:
- Just generate one line at a time to simulate the user's message.
- Do not give away all the instruction at once. Only provide the information that is necessary \
for the current step.
- Do not hallucinate information that is not provided in the instruction. For example, if the \
agent asks for the order id but it is not mentioned in the instruction, do not make up an order \
id, just say you do not remember or have it.
- If the instruction goal is satisified, generate '{stop}' as a standalone message without \
anything else to end the conversation.
- Do not repeat the exact instruction in the conversation. Instead, use your own words to \
convey the same information.
- Try to make the conversation as natural as possible, and stick to the personalities in the \
instruction."""


def tau_user_system_prompt(task: str, stop_signal: str = STOP_SIGNAL) -> str:
    """tau-bench's LLM user's system prompt (its ``LLMUserSimulationEnv``, MIT), holding the
    task's instruction: the user of scenarios imported from tau-bench."""
    return _TAU_USER.format(task=task, stop=stop_signal)


def user_system_prompt(task: str, stop_signal: str = STOP_SIGNAL) -> str:
    """The simulated user's system prompt, holding the whole task."""
    return _USER.format(task=task.strip(), stop=stop_signal)
