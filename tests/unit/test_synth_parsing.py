"""Reading model replies: JSON and code blocks, the reply models, skeletons, methods, assembly."""

from __future__ import annotations

import ast

import pytest

from envscaler.synth.llm import ParseError
from envscaler.synth.parsing import fenced_blocks, json_reply, json_value, python_reply
from envscaler.synth.scen.models import ChecklistReply, SolutionReply, TaskReply
from envscaler.synth.skel.assemble import Method, assemble, hoist, parse_method, parse_skeleton
from envscaler.synth.skel.models import CallChoice, CheckerVerdict, OperationList, TaskJudgement, Topic


def test_json_is_taken_from_the_last_json_block() -> None:
    text = 'Thinking...\n```json\n{"a": 1}\n```\nCorrection:\n```json\n{"a": 2}\n```\n'
    assert json_value(text) == {"a": 2}


@pytest.mark.parametrize("text", ['{"a": 1}', 'Sure: {"a": 1} done.', '```\n{"a": 1}\n```',
                                  '```JSON\n{"a": 1}\n```', '```json\n{"a": 1}'])
def test_json_without_a_proper_block_is_still_found(text: str) -> None:
    assert json_value(text) == {"a": 1}


@pytest.mark.parametrize(("text", "fragment"), [
    ("No JSON here, sorry.", "the reply contains no JSON"),
    ('```json\n{"a": 1,,}\n```', "the JSON does not parse"),
])
def test_replies_without_usable_json_fail_with_a_reason(text: str, fragment: str) -> None:
    with pytest.raises(ParseError, match=fragment):
        json_value(text)


def test_a_reply_model_names_every_wrong_field() -> None:
    with pytest.raises(ParseError) as caught:
        json_reply('```json\n{"summary": "X", "usefulness": 11}\n```', Topic)
    message = str(caught.value)
    assert message.startswith("invalid reply: ")
    assert "summary: String should have at least 3 characters" in message
    assert "introduction: Field required" in message
    assert "usefulness: Input should be less than or equal to 10" in message


def test_reply_models_accept_what_models_really_send() -> None:
    judged = json_reply('{"reason": "r", "needs_environment": true, "analysis": "extra"}',
                        TaskJudgement)
    assert judged.needs_environment is True
    verdict = json_reply('{"verdict": " Warning ", "reason": "ok"}', CheckerVerdict)
    assert verdict.verdict == "warning"
    choice = json_reply('{"tool": "t", "case": "NEGATIVE"}', CallChoice)
    assert (choice.arguments, choice.case) == ({}, "negative")
    with pytest.raises(ParseError, match="needs_environment: Input should be a valid boolean"):
        json_reply('{"needs_environment": "definitely"}', TaskJudgement)


def test_operation_lists_need_distinct_snake_case_names_of_both_kinds() -> None:
    ok = json_reply('{"operations": [{"name": "get_a", "description": "d", "type": "query"},'
                    '{"name": "set_a", "description": "d", "type": "State Change"}]}',
                    OperationList)
    assert [op.type for op in ok.operations] == ["query", "state_change"]
    for body, fragment in [
        ('[{"name": "getA", "description": "d", "type": "query"}]', "not a snake_case"),
        ('[{"name": "class", "description": "d", "type": "query"}]', "not a snake_case"),
        (('[{"name": "a", "description": "d", "type": "query"},'
         '{"name": "a", "description": "d", "type": "state_change"}]'), "duplicate operation"),
        ('[{"name": "a", "description": "d", "type": "query"}]', "both query and state_change"),
    ]:
        with pytest.raises(ParseError, match=fragment):
            json_reply(f'{{"operations": {body}}}', OperationList)


def test_scenario_reply_models() -> None:
    with pytest.raises(ParseError, match="write at least 20"):
        json_reply('{"task": "Too short."}', TaskReply)
    with pytest.raises(ParseError, match="must start with 'Has '"):
        json_reply('{"items": ["Has a thing", "Check another"]}', ChecklistReply)
    with pytest.raises(ParseError, match="distinct"):
        json_reply('{"items": ["Has a", "Has a"]}', ChecklistReply)
    with pytest.raises(ParseError, match="calls: List should have at least 1 item"):
        json_reply('{"calls": []}', SolutionReply)


def test_python_blocks() -> None:
    assert fenced_blocks("```py\nx = 1\n```\n```python\ny = 2\n```", ("python", "py")) == \
        ["x = 1", "y = 2"]
    assert python_reply("```python\n    def f(self):\n        return 1\n```") == \
        "def f(self):\n    return 1\n"
    with pytest.raises(ParseError, match="no ```python block"):
        python_reply("def f(): pass")
    with pytest.raises(ParseError, match=r"the code does not parse: .* \(line 1\)"):
        python_reply("```python\ndef f(:\n```")


SKELETON = '''```python
from typing import Dict, TypedDict


class ItemInfo(TypedDict):
    item_id: str


class Shop:
    def __init__(self, init_config: dict):
        self.items: Dict[str, ItemInfo] = {}
        self.orders = {}
        self._cache = {}
        self.init_config = init_config
        # Rule: orders refer to items.
```'''


def test_skeletons() -> None:
    skeleton = parse_skeleton(SKELETON)
    assert (skeleton.class_name, skeleton.attributes) == ("Shop", ["items", "orders"])
    for text, fragment in [
        (SKELETON.replace("class Shop:", "class Shop:\n    def helper(self):\n        pass\n"),
         "must define only __init__"),
        (SKELETON.replace("class Shop:", "class shop:"), "not CamelCase"),
        (SKELETON + "\n```python\nclass A:\n    pass\nclass B:\n    pass\n```",
         "exactly one class besides the TypedDicts, found 2"),
        ("```python\nclass Shop:\n    def __init__(self, c):\n        pass\n```",
         "declares no state attributes"),
    ]:
        with pytest.raises(ParseError, match=fragment):
            parse_skeleton(text)


def test_methods_are_extracted_with_their_imports() -> None:
    method = parse_method("Here:\n```python\nfrom datetime import datetime\nimport re\n\n"
                          "def stamp(self) -> dict:\n    return {'success': True}\n```", "stamp")
    assert method.imports == ["from datetime import datetime", "import re"]
    assert method.code == "def stamp(self) -> dict:\n    return {'success': True}\n"
    inside = parse_method("```python\nclass Shop:\n    def stamp(self):\n        return 1\n```",
                          "stamp")
    assert inside.code == "def stamp(self):\n    return 1\n"
    for text, fragment in [
        ("```python\ndef other(self):\n    pass\n```", "must define the method stamp; it defines other"),
        ("```python\ndef stamp():\n    pass\n```", "self as its first parameter"),
        ("```python\ndef stamp(self):\n    pass\ndef stamp(self):\n    pass\n```", "more than once"),
    ]:
        with pytest.raises(ParseError, match=fragment):
            parse_method(text, "stamp")


def test_imports_are_hoisted_merged_and_sorted() -> None:
    assert hoist(["from typing import Dict, TypedDict", "import uuid", "from typing import Dict",
                  "from __future__ import annotations", "import json as j",
                  "from datetime import datetime, timezone", "from datetime import datetime"]) == [
        "from __future__ import annotations", "import json as j", "import uuid",
        "from datetime import datetime, timezone", "from typing import Dict, TypedDict"]


def test_assembly_keeps_the_rule_comments_and_puts_methods_in_the_class() -> None:
    skeleton = parse_skeleton(SKELETON)
    methods = [Method("get_item", ["from typing import Optional"],
                      "def get_item(self, item_id: str) -> dict:\n    return {'success': True}\n"),
               Method("stamp", ["from datetime import datetime", "from typing import Dict"],
                      "def stamp(self) -> dict:\n    return {'success': True, "
                      "'data': datetime.now().isoformat()}\n")]
    source = assemble(skeleton.code, methods)
    module = ast.parse(source)
    assert source.startswith("from datetime import datetime\n"
                             "from typing import Dict, Optional, TypedDict\n\n\n")
    shop = next(node for node in module.body if isinstance(node, ast.ClassDef) and node.name == "Shop")
    assert [node.name for node in shop.body if isinstance(node, ast.FunctionDef)] == \
        ["__init__", "get_item", "stamp"]
    rule = source.index("# Rule: orders refer to items.")
    assert rule < source.index("def get_item") < source.index("def stamp")
    assert "\n\n\n\n" not in source and source.endswith("\n") and not source.endswith("\n\n")
    assert assemble(skeleton.code, methods) == source  # deterministic
