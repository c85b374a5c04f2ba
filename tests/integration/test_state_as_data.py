"""An environment whose state is objects (a small file system of ``Folder`` and ``Note``
objects), served by a real gateway: the state reads as the tree of their public attributes, a
check function walks that tree, and a state that points back at itself is a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envscaler.format import load_env, sync_manifest
from tests.integration.gateway_fixtures import *  # noqa: F403 - the fixtures
from tests.integration.gateway_fixtures import running_gateway

ENV = "object_notes"
SOURCE = '''\
import dataclasses


@dataclasses.dataclass
class Note:
    title: str
    words: set


class Folder:
    def __init__(self, name):
        self.name = name
        self.notes = {}
        self.folders = {}
        self._cache = None


class ObjectNotes:
    def __init__(self, init_config):
        self.root = Folder("/")
        for name, titles in init_config.get("_folders", {}).items():
            folder = self.root.folders[name] = Folder(name)
            for title in titles:
                folder.notes[title] = Note(title, set())

    def write(self, folder: str, title: str, words: list) -> dict:
        """Write a note in a folder, creating both when missing.

        Args:
            folder: Name of the folder under the root.
            title: Title of the note.
            words: Words of the note.
        """
        target = self.root.folders.setdefault(folder, Folder(folder))
        target.notes[title] = Note(title, set(words))
        return {"success": True, "data": target.notes[title]}

    def link_parent(self, folder: str) -> dict:
        """Give a folder a link back to the root (which makes the state a cycle).

        Args:
            folder: Name of the folder under the root.
        """
        self.root.folders[folder].parent = self.root
        return {"success": True}
'''
CHECK = '''\
def check_func(final_state):
    notes = final_state["root"]["folders"]["work"]["notes"]
    return notes["plan"]["words"] == ["alpha", "beta"] and "_cache" not in final_state["root"]
'''
SCENARIO = {
    "id": "notes-1", "split": "eval", "task": "Write the plan note in work.",
    "init_config": {"_folders": {"home": ["todo"]}},
    "checklist": [{"item": "Has the plan been written?", "check_func": CHECK}],
    "solution": [{"name": "write",
                  "arguments": {"folder": "work", "title": "plan", "words": ["beta", "alpha"]}}],
}


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("objects") / "envs"
    env_dir = root / ENV
    env_dir.mkdir(parents=True)
    (env_dir / "env.py").write_text(SOURCE)
    manifest = {
        "id": ENV, "class_name": "ObjectNotes", "summary": "Notes in folders, as objects.",
        "introduction": "Folders of notes held as Python objects.",
        "state_space": [{"entity": "Folder", "attributes": "name, notes, folders",
                         "description": "A folder."}],
        "constraint_rules": [],
        "operations": [{"name": "write", "description": "write", "type": "state_change"},
                       {"name": "link_parent", "description": "link", "type": "state_change"}],
        "tools": [],
        "provenance": {"model": "hand-written", "created": "2025-01-01",
                       "pipeline_version": "test", "content_hash": "sha256:" + "0" * 64},
    }
    (env_dir / "env.json").write_text(json.dumps(manifest))
    (env_dir / "scenarios.jsonl").write_text(json.dumps(SCENARIO) + "\n")
    sync_manifest(env_dir)
    load_env(env_dir)
    return root


async def test_object_state_is_served_as_a_tree_and_checks_walk_it(
        make_settings, catalogue: Path) -> None:
    async with running_gateway(make_settings(catalogue=catalogue)) as (_, client):
        created = await client.post("/v1/sessions", json={"env": ENV, "scenario": "notes-1"})
        assert created.status_code == 201, created.text
        session_id = created.json()["session_id"]
        state = (await client.get(f"/v1/sessions/{session_id}/state")).json()["state"]
        assert state == {"root": {"name": "/", "notes": {}, "folders": {
            "home": {"name": "home", "notes": {"todo": {"title": "todo", "words": []}},
                     "folders": {}}}}}
        assert (await client.post(f"/v1/sessions/{session_id}/validate")).json()["reward"] == 0.0

        call = await client.post(f"/v1/sessions/{session_id}/calls", json={
            "name": "write", "arguments": {"folder": "work", "title": "plan",
                                           "words": ["beta", "alpha"]}})
        assert call.json()["result"] == {"success": True,
                                         "data": {"title": "plan", "words": ["alpha", "beta"]}}
        assert (await client.post(f"/v1/sessions/{session_id}/validate")).json()["reward"] == 1.0


async def test_a_state_that_points_back_at_itself_is_an_error_naming_the_place(
        make_settings, catalogue: Path) -> None:
    async with running_gateway(make_settings(catalogue=catalogue)) as (_, client):
        created = await client.post("/v1/sessions", json={"env": ENV, "scenario": "notes-1"})
        session_id = created.json()["session_id"]
        linked = await client.post(f"/v1/sessions/{session_id}/calls", json={
            "name": "link_parent", "arguments": {"folder": "home"}})
        assert linked.json()["ok"] is True
        response = await client.get(f"/v1/sessions/{session_id}/state")
        assert response.status_code == 409
        assert response.json()["error"] == {
            "type": "StateNotData",
            "message": "the state is not data: a cycle: this Folder contains itself "
                       "(at state.root.folders.home.parent)"}
        validation = await client.post(f"/v1/sessions/{session_id}/validate")
        assert validation.status_code == 409
        assert validation.json()["error"]["type"] == "StateNotData"
