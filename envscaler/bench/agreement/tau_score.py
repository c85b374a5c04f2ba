"""tau-bench's own reward of each line of an answer file (`envscaler eval tau-bench`'s format),
computed by tau-bench's ``Env``: the outputs first as ``respond`` actions, then the actions until
tau says the episode is done (a terminating tool: the reward computed there), else
``calculate_reward`` at the end, as an episode ends. Runs tau-bench's code: only in a throwaway
virtualenv with pydantic (tau's user simulator, the one user of litellm, is replaced by a silent
one, so a stand-in module takes litellm's place). Never imported by the project.

Run: ``VENV/bin/python envscaler/bench/agreement/tau_score.py CHECKOUT ANSWERS.jsonl > KIND.theirs.json``.
"""

import json
import sys
import tempfile
from pathlib import Path

stubs = Path(tempfile.mkdtemp())
(stubs / "litellm.py").write_text("def completion(*args, **kwargs):\n"
                                  "    raise RuntimeError('no model when scoring')\n")
sys.path[:0] = [sys.argv[1], str(stubs)]

from tau_bench.envs import get_env  # noqa: E402
from tau_bench.types import Action  # noqa: E402


class SilentUser:
    def reset(self, instruction=None):
        return ""

    def step(self, content):
        return ""

    def get_total_cost(self):
        return 0.0


envs = {}
rewards = {}
for raw in Path(sys.argv[2]).read_text().splitlines():
    line = json.loads(raw)
    if line["env"] not in envs:
        envs[line["env"]] = get_env(line["env"], user_strategy="human", user_model="none",
                                    task_split="test", task_index=0)
        envs[line["env"]].user = SilentUser()
    env = envs[line["env"]]
    env.reset(task_index=line["task_id"])
    steps = [Action(name="respond", kwargs={"content": text}) for text in line["outputs"]]
    steps += [Action(**action) for action in line["actions"]]
    reward = None
    for action in steps:
        response = env.step(action)
        if response.done:
            reward = response.reward
            break
    if reward is None:
        reward = env.calculate_reward().reward
    rewards[f"{line['env']}-{line['task_id']}"] = reward
print(json.dumps(rewards))
