"""The client's wire models (``envscaler_client.models``) describe what the gateway answers: for
every model of the client, the server's OpenAPI document has a schema of the same name with the
same fields, the client requires none that the server may leave out, and each field has the same
shape (types, nesting, references), which the client may only widen the way a tolerant reader
does: ``None`` allowed too, or any string where the server lists the strings it sends. The two
sets of models are written twice on purpose (the client installs without the server); this is
what keeps them from drifting apart."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from pydantic import BaseModel

from envscaler_client import models as client_models
from envscaler.server.app import create_app
from envscaler.server.settings import Settings

REF = "#/components/schemas/{model}"


def _server_schemas() -> dict[str, Any]:
    return create_app(Settings()).openapi()["components"]["schemas"]


def _client_models() -> list[type[BaseModel]]:
    return [model for name, model in inspect.getmembers(client_models, inspect.isclass)
            if issubclass(model, BaseModel) and model.__module__ == client_models.__name__
            and not name.startswith("_")]


def shape(schema: dict[str, Any]) -> Any:
    """What a property schema says of the data, without titles, descriptions or defaults."""
    if "$ref" in schema:
        return ("ref", schema["$ref"].rsplit("/", 1)[1])
    if "anyOf" in schema:
        return ("anyOf", sorted(repr(shape(option)) for option in schema["anyOf"]))
    kind = schema.get("type")
    if kind == "array":
        return ("array", shape(schema.get("items", {})))
    if kind == "object":
        extra = schema.get("additionalProperties")
        return ("object", shape(extra) if isinstance(extra, dict) else extra)
    return (kind, schema.get("enum"), schema.get("const"))


def reads(client: Any, server: Any) -> bool:
    """Whether data of the server's shape is read by the client's."""
    if client == server:
        return True
    if client[0] == "anyOf" and repr(server) in client[1]:
        return True
    return client == ("string", None, None) and server[0] == "string" and server[1] is not None


SERVER = _server_schemas()
CLIENT = _client_models()


def test_every_client_model_is_checked() -> None:
    assert len(CLIENT) >= 20, [model.__name__ for model in CLIENT]


@pytest.mark.parametrize("model", CLIENT, ids=lambda model: model.__name__)
def test_the_client_model_matches_the_servers_schema(model: type[BaseModel]) -> None:
    assert model.__name__ in SERVER, f"the gateway's OpenAPI document has no {model.__name__}"
    ours = model.model_json_schema(ref_template=REF, mode="serialization")
    theirs = SERVER[model.__name__]
    assert set(ours.get("properties", {})) == set(theirs.get("properties", {}))
    assert set(ours.get("required", [])) <= set(theirs.get("required", []))
    for name, prop in theirs.get("properties", {}).items():
        assert reads(shape(ours["properties"][name]), shape(prop)), name
