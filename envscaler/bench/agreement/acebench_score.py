"""ACEBench's own end-to-end verdict of each line of an answer file (`envscaler eval acebench`'s
format): each call rendered and executed by the category's own ``execute_agent_func_call`` (one
execution a call), the final states collected and saved as ACEBench's inference saves them
(``SAVED_CLASS``, through JSON), then judged by ``eval_main.agent_eval``. Runs ACEBench's code:
only in a throwaway virtualenv (stand-in modules take the place of pandas and openpyxl, which
the agent evaluation does not use). Never imported by the project. A multi-step line whose call
fails to execute is reported under "crashed": ACEBench's multi-step inference itself stops on it
(it saves the error's class list as a state).

Run: ``VENV/bin/python envscaler/bench/agreement/acebench_score.py CHECKOUT ANSWERS.jsonl KIND >
KIND.theirs.json`` (KIND names the run: ACEBench keeps instances per model name).
"""

import ast
import json
import os
import sys
import tempfile
from pathlib import Path

root, answers, kind = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve(), sys.argv[3]
stubs = Path(tempfile.mkdtemp())
(stubs / "pandas.py").write_text("")
(stubs / "openpyxl").mkdir()
(stubs / "openpyxl" / "__init__.py").write_text("class Workbook:\n    pass\n")
(stubs / "openpyxl" / "styles.py").write_text("class Alignment:\n    pass\n")
sys.path[:0] = [str(root), str(stubs)]
os.chdir(tempfile.mkdtemp())  # ACEBench writes its score files under the working directory

import eval_main  # noqa: E402
from model_inference.multi_step import multi_step_utils  # noqa: E402
from model_inference.multi_turn import multi_turn_utils  # noqa: E402
from model_inference.multi_turn.execution_role import EXECUTION  # noqa: E402

SAVED = next(ast.literal_eval(node.value) for node in ast.parse(
    (root / "model_inference" / "apimodel_inference.py").read_text()).body
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SAVED_CLASS")
eval_main.language = "en"
eval_main.OUTPUT_PATH = "./score_all/score_en/"
os.makedirs(f"./score_all/score_en/{kind}", exist_ok=True)
questions = {}
for category in ("multi_step", "multi_turn"):
    data = root / "data_all" / "data_en"
    possible = {a["id"]: a for a in map(json.loads, (data / "possible_answer" /
                                                     f"data_agent_{category}.json").open())}
    for question in map(json.loads, (data / f"data_agent_{category}.json").open()):
        questions[question["id"]] = (category, question, possible[question["id"]])
render = EXECUTION(None, None, None, None, "en").decoded_output_to_execution_list
verdicts, crashed = {}, []
for line in map(json.loads, answers.open()):
    category, question, possible = questions[line["id"]]
    utils = multi_step_utils if category == "multi_step" else multi_turn_utils
    instances, crash = [], False
    for call in line["calls"]:
        text = render([{call["name"]: call["arguments"]}])
        _, found = utils.execute_agent_func_call(text, question["initial_config"],
                                                 question["involved_classes"], kind,
                                                 question["id"], "en")
        if not isinstance(found, dict):
            crash = category == "multi_step"
            if crash:
                break
            continue
        if found not in instances:
            instances.append(found)
    if crash:
        crashed.append(line["id"])
        continue
    result = json.loads(json.dumps([
        {name: {key: value for key, value in instance.__dict__.items() if key in SAVED[name]}}
        for found in instances for name, instance in found.items()]))
    accuracy, _ = eval_main.agent_eval([{"id": question["id"], "result": result, "process": []}],
                                       [question], [possible], "agent_" + category, kind)
    verdicts[line["id"]] = float(accuracy)
if crashed:
    print(f"crashed (not scored by ACEBench): {crashed}", file=sys.stderr)
print(json.dumps(verdicts))
