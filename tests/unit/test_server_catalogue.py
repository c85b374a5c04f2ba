"""Tool-argument validation before any sandbox: the field to blame and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from envscaler.server.catalogue import ServedCatalogue
from envscaler.server.errors import ApiError

ROOT = Path(__file__).resolve().parents[2] / "generated_envs"


@pytest.fixture(scope="module")
def catalogue() -> ServedCatalogue:
    return ServedCatalogue(ROOT)


def rejection(catalogue: ServedCatalogue, tool: str, arguments: object) -> ApiError:
    env = catalogue.env("library_loans")
    with pytest.raises(ApiError) as caught:
        catalogue.validate_arguments(env, tool, arguments)
    return caught.value


def test_every_tool_has_a_compiled_validator(catalogue: ServedCatalogue) -> None:
    env = catalogue.env("library_loans")
    assert set(env.validators) == set(env.tool_names) and len(env.tool_names) == 13


def test_valid_arguments_pass(catalogue: ServedCatalogue) -> None:
    env = catalogue.env("library_loans")
    catalogue.validate_arguments(env, "get_member", {"member_id": "M-1001"})
    catalogue.validate_arguments(env, "pay_fines", {"member_id": "M-1001", "amount": None})
    catalogue.validate_arguments(
        env, "search_books", {"query": "x", "field": "title", "available_only": True}
    )


@pytest.mark.parametrize(
    ("tool", "arguments", "field", "message"),
    [
        ("get_member", {"member_id": 42}, "member_id", "member_id: 42 is not of type 'string'"),
        ("checkout_book", {"member_id": "M"}, "book_id", "book_id: is a required property"),
        (
            "get_member",
            {"member_id": "M", "extra": 1},
            "extra",
            "extra: is not a parameter of this tool",
        ),
        (
            "search_books",
            {"query": "q", "field": "all"},
            "field",
            "field: 'all' is not one of ['title', 'author', 'any']",
        ),
        (
            "search_books",
            {"query": "q", "available_only": "yes"},
            "available_only",
            "available_only: 'yes' is not of type 'boolean'",
        ),
    ],
)
def test_invalid_arguments_name_the_field(
    catalogue: ServedCatalogue, tool: str, arguments: dict, field: str, message: str
) -> None:
    error = rejection(catalogue, tool, arguments)
    assert (error.status, error.type, error.field, error.message) == (
        422,
        "InvalidArguments",
        field,
        message,
    )


def test_all_missing_fields_are_named(catalogue: ServedCatalogue) -> None:
    error = rejection(catalogue, "checkout_book", {})
    assert error.field == "member_id" and "also missing: book_id" in error.message


def test_unknown_tool_and_env_are_404(catalogue: ServedCatalogue) -> None:
    error = rejection(catalogue, "_release_copy", {})
    assert (error.status, error.type) == (404, "UnknownTool")
    with pytest.raises(ApiError) as caught:
        catalogue.env("nope")
    assert (caught.value.status, caught.value.type) == (404, "UnknownEnv")
    with pytest.raises(ApiError) as caught:
        catalogue.env("library_loans").scenario("nope")
    assert (caught.value.status, caught.value.type) == (404, "UnknownScenario")


def test_non_object_arguments_are_rejected(catalogue: ServedCatalogue) -> None:
    error = rejection(catalogue, "get_member", ["M-1001"])
    assert (error.type, error.field) == ("InvalidArguments", "arguments")


def test_broken_environment_folders_are_logged_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import shutil

    shutil.copytree(ROOT / "library_loans", tmp_path / "library_loans")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "env.py").write_text("class X:\n    pass\n")
    caplog.set_level("ERROR", logger="envscaler")
    served = ServedCatalogue(tmp_path)
    assert list(served.envs) == ["library_loans"]
    assert any("broken" in record.getMessage() for record in caplog.records)


def test_a_bad_scenario_line_is_logged_and_its_environment_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import shutil

    shutil.copytree(ROOT / "library_loans", tmp_path / "library_loans")
    path = tmp_path / "library_loans" / "scenarios.jsonl"
    lines = path.read_text().split("\n")
    path.write_text("\n".join([lines[0], "{not json", *lines[1:]]))
    caplog.set_level("WARNING", logger="envscaler")
    served = ServedCatalogue(tmp_path)
    assert len(served.env("library_loans").scenarios) == 4
    assert any(f"{path}:2: invalid JSON" in record.getMessage() for record in caplog.records)


# jsonschema_rs accepts the usual calls before jsonschema is asked (envscaler.server.catalogue.FAST_KEYWORDS)

VALUES = [None, True, False, 0, 1, -1, 1.0, -0.0, 1.5, 2**70, "", "x", "é", "😀😀", "a\u0301",
          [], [1], [1.0], [True], ["x", "x"], {}, {"a": 1}, {"a": True}]
EDGE_SCHEMAS = [
    {"type": "integer"},
    {"type": "number"},
    {"type": ["string", "null"]},
    {"type": "string", "minLength": 2, "maxLength": 3},
    {"enum": [1, "a", None, [1], {"a": 1}]},
    {"enum": [True]},
    {"const": 0},
    {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"],
     "additionalProperties": False},
]


def _instances(schema: dict) -> list[object]:
    """Every value, and objects made of the schema's own properties set to every value."""
    instances: list[object] = list(VALUES)
    names = [*schema.get("properties", {}), "extra"]
    base = {name: "x" for name in schema.get("required", [])}
    for name in names:
        instances += [{**base, name: value} for value in VALUES]
    return instances


def test_every_catalogue_tool_is_judged_fast_first(catalogue: ServedCatalogue) -> None:
    for env in catalogue.envs.values():
        assert set(env.accepts) == set(env.validators), env.id


def test_jsonschema_rs_accepts_only_what_jsonschema_accepts(catalogue: ServedCatalogue) -> None:
    from jsonschema import Draft202012Validator

    from envscaler.server.catalogue import _fast_validator, tool_parameters

    schemas = EDGE_SCHEMAS + [
        tool_parameters(tool) for env in catalogue.envs.values() for tool in env.tools
    ]
    compared = 0
    for schema in schemas:
        accepts = _fast_validator(schema)
        assert accepts is not None, schema
        python = Draft202012Validator(schema)
        for instance in _instances(schema):
            assert accepts(instance) == python.is_valid(instance), (schema, instance)
            compared += 1
    assert compared > 10_000


def test_other_keywords_are_judged_by_jsonschema_alone() -> None:
    from envscaler.server.catalogue import _fast_validator

    for schema in (
        {"type": "string", "pattern": "^[0-9]+$"},
        {"type": "string", "format": "email"},
        {"type": "number", "multipleOf": 0.1},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}},
        {"type": "array", "uniqueItems": True},
    ):
        assert _fast_validator(schema) is None, schema
