"""Every fact about the published EnvScaler release that the importer depends on, in one place.

The release (MIT, RUC-NLPIR) was published twice:

- on the Hugging Face hub, as two dataset repositories (``tools`` and ``init_config`` stored as
  JSON strings inside the JSON records);
- in the GitHub repository RUC-NLPIR/EnvScaler, as plain files under
  ``interact_with_env/envscaler_env/data/`` (environments as a dict keyed by env_id), with copies
  under ``rl/roll/pipeline/agentic/env/envscaler_env/data/``.

The pinned revisions and sha256 digests below are those of the Hugging Face files as uploaded on
2026-01-09 (later commits of both dataset repositories touch only README.md). They were taken
from a downstream loader that pins the same files; no hub is reachable from the machine this
importer was written on, so they have not been re-measured here. A download whose bytes differ is
refused; to re-pin, change the revision, digest and size together.
"""

from __future__ import annotations

from dataclasses import dataclass

HF_ENDPOINT = "https://huggingface.co"
"""Default hub; ``HF_ENDPOINT`` (the variable huggingface_hub reads) overrides it, e.g. a mirror."""

RELEASE_DATE = "2026-01-09"
"""When the release files were uploaded: ``provenance.created`` of every imported environment
(unless ``--created`` says otherwise), so that an import is reproducible byte for byte."""

MODEL = "EnvScaler release (gpt-4.1)"
"""``provenance.model``: the release's environments were synthesized with gpt-4.1."""

PIPELINE_PREFIX = "envscaler-release@"
"""``provenance.pipeline_version`` is this plus the revision of the environments file, or
``local`` when the file is not byte-identical to a pinned one."""

ENV_ID_PREFIX = "envscaler_"
"""Imported environment ids are this prefix plus the slugified release env_id."""


@dataclass(frozen=True)
class PinnedFile:
    """One file of the release at a pinned revision of a Hugging Face dataset repository."""

    kind: str  # "envs" or "scenarios"
    repo_id: str
    filename: str
    revision: str
    sha256: str

    @property
    def short_revision(self) -> str:
        return self.revision[:12]

    def url(self, endpoint: str) -> str:
        return (f"{endpoint.rstrip('/')}/datasets/{self.repo_id}/resolve/{self.revision}/"
                f"{self.filename}")


ENVS_FILE = PinnedFile(
    kind="envs",
    repo_id="XXHStudyHard/EnvScaler-191-Env",
    filename="191_env_metadata_processed.json",
    revision="3d30c6ac2446c06b79d727f196b84df90cc9cb69",
    sha256="600fa6d9613e3a104807edbff863d26ea48aeb1d5d3ef758c0e6f109f04f49bd",
)
SCENARIOS_FILE = PinnedFile(
    kind="scenarios",
    repo_id="XXHStudyHard/EnvScaler-RL-Scenario",
    filename="envscaler_rl_scenario_metadata.json",
    revision="a14061538b0ffd3e84d44edf40fbe67477f83552",
    sha256="99c05a81710da5adc81453a05f166023f2cd3235a03a9eb8b5736ba8c7c2abe8",
)
PINNED = (ENVS_FILE, SCENARIOS_FILE)

# File names of both published shapes, in the order they are looked for in a --from folder.
HF_ENVS_NAME = ENVS_FILE.filename  # a list of environment records
GITHUB_ENVS_NAME = "191_env_metadata.json"  # a dict keyed by env_id
HF_SCENARIOS_NAME = SCENARIOS_FILE.filename  # also the name of the GitHub repository's RL copy
GITHUB_SCENARIOS_NAME = "rl_scenario_metadata.json"
ENVS_NAMES = (HF_ENVS_NAME, GITHUB_ENVS_NAME)
SCENARIOS_NAMES = (HF_SCENARIOS_NAME, GITHUB_SCENARIOS_NAME)

EXPECTED_ENVS = 191
EXPECTED_SCENARIOS = 2550
