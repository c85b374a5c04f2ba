"""The environment format: manifest and scenario models, catalogue loader, tool schemas."""

from envscaler.format.loader import (
    Catalogue,
    EnvPackage,
    FormatError,
    content_hash,
    load_catalogue,
    load_env,
    sync_manifest,
)
from envscaler.format.models import (
    ChecklistItem,
    EnvManifest,
    Operation,
    Provenance,
    Scenario,
    StateEntity,
    ToolCall,
    UserTurn,
)
from envscaler.format.toolschema import ToolSchemaError, class_names, derive_tools, public_tool_names

__all__ = [
    "Catalogue",
    "ChecklistItem",
    "EnvManifest",
    "EnvPackage",
    "FormatError",
    "Operation",
    "Provenance",
    "Scenario",
    "StateEntity",
    "ToolCall",
    "UserTurn",
    "ToolSchemaError",
    "class_names",
    "content_hash",
    "derive_tools",
    "load_catalogue",
    "load_env",
    "public_tool_names",
    "sync_manifest",
]
