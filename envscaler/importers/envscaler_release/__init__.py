"""Import the EnvScaler release (Song et al. 2026; MIT) into our catalogue format.

``import_release(envs_file, scenarios_file, out)`` converts the published files (191 environment
records, 2,550 RL scenario rows; Hugging Face or GitHub shape) into ``out/<env_id>/`` folders with
``env.py``, ``env.json`` and ``scenarios.jsonl``, each loaded with ``envscaler.format.loader.load_env``
before it is moved into place. ``download_release`` fetches the files at pinned revisions
(``pins.py``), sha256-checked. Generated code is only parsed, never run. See ``convert.py`` for the
field mapping.
"""

from envscaler.importers.envscaler_release.convert import (
    ConvertedEnv,
    RecordError,
    convert_env,
    convert_scenario,
    env_id_for,
    scenario_id_for,
)
from envscaler.importers.envscaler_release.download import DownloadError, download_release
from envscaler.importers.envscaler_release.importer import ImportedEnv, ImportReport, Problem, import_release
from envscaler.importers.envscaler_release.source import SourceError, locate, read_file

__all__ = [
    "ConvertedEnv",
    "DownloadError",
    "ImportReport",
    "ImportedEnv",
    "Problem",
    "RecordError",
    "SourceError",
    "convert_env",
    "convert_scenario",
    "download_release",
    "env_id_for",
    "import_release",
    "locate",
    "read_file",
    "scenario_id_for",
]
