"""Where the checkout's own files are (standard library only: the command line's help reads it)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CATALOGUE = REPO_ROOT / "generated_envs"
"""The checkout's catalogue: the default of the gateway and of every command, from any directory."""
