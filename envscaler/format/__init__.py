"""The environment format: manifest and scenario models, catalogue loader, folder writer, tool
schemas."""

from envscaler.format.folders import (
    EnvFolderError,
    env_files,
    env_folders,
    manifest_bytes,
    publish_env,
    scenarios_bytes,
    sync_manifest,
    write_files,
)
from envscaler.format.loader import (
    Catalogue,
    EnvPackage,
    FormatError,
    content_hash,
    load_catalogue,
    load_code,
    load_env,
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
    "EnvFolderError",
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
    "env_files",
    "env_folders",
    "load_catalogue",
    "load_code",
    "load_env",
    "manifest_bytes",
    "public_tool_names",
    "publish_env",
    "scenarios_bytes",
    "sync_manifest",
    "write_files",
]
