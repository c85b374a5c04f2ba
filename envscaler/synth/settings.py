"""Configuration of the synthesis pipeline, from environment variables prefixed ENVSCALER_SYNTH_.

Model access (endpoint, model, temperature, concurrency, attempts) can be overridden per stage with
``ENVSCALER_SYNTH_STAGES``, a JSON object whose keys are stage names or prefixes of them::

    ENVSCALER_SYNTH_STAGES='{"logic.methods": {"model": "gpt-4.1", "temperature": 0.2},
                             "quality": {"model": "gpt-4.1-mini"}}'

The most specific key wins (``logic.methods`` before ``logic``). Sandbox settings are not here:
generated code runs in the same sandboxes as the gateway's, configured by ``ENVSCALER_SANDBOX_*``
(``envscaler/server/settings.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

Mode = Literal["live", "record", "replay"]


class StageOverride(BaseModel):
    """Per-stage model settings; a field left out falls back to the global value."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    concurrency: int | None = Field(None, ge=1)
    max_attempts: int | None = Field(None, ge=1, le=20)


class ModelCost(BaseModel):
    """US dollars per 1,000 tokens."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)


@dataclass(frozen=True)
class StageModel:
    """The resolved model settings of one stage."""

    stage: str
    model: str
    temperature: float
    concurrency: int
    max_attempts: int


class SynthSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ENVSCALER_SYNTH_", extra="ignore")

    # --- model access ---------------------------------------------------------------------------
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint; unset: the SDK's")
    api_key: SecretStr | None = Field(None, description="unset: the SDK reads OPENAI_API_KEY")
    model: str = "gpt-4.1"
    temperature: float = Field(0.7, ge=0, le=2)
    concurrency: int = Field(8, ge=1, description="model calls in flight per stage")
    max_attempts: int = Field(3, ge=1, le=20, description="replies tried per item before a drop")
    transport_retries: int = Field(4, ge=0, le=20, description="retries of a failed request")
    backoff: float = Field(1.0, ge=0, description="first back-off in seconds; doubles each retry")
    backoff_max: float = Field(30.0, ge=0)
    request_timeout: float = Field(180.0, gt=0)
    max_tokens: int | None = Field(None, ge=1)
    stages: dict[str, StageOverride] = Field(default_factory=dict)
    costs: dict[str, ModelCost] = Field(default_factory=dict)

    # --- record and replay ----------------------------------------------------------------------
    mode: Mode = "live"
    transcript: Path | None = None

    # --- outputs ----------------------------------------------------------------------------------
    created: date | None = Field(None, description="provenance date; unset: the replies' date")
    seed: int = 0
    splits: dict[str, float] = Field(default_factory=lambda: {"train": 0.8, "rl": 0.1,
                                                              "eval": 0.1})

    # --- SkelBuilder ------------------------------------------------------------------------------
    min_usefulness: int = Field(7, ge=1, le=10)
    min_modelability: int = Field(7, ge=1, le=10)
    dedup_method: Literal["tfidf", "jaccard"] = "tfidf"
    dedup_threshold: float = Field(0.5, gt=0, le=1)
    min_operations: int = Field(4, ge=1)
    max_operations: int = Field(30, ge=1)
    exec_valid_cases: int = Field(3, ge=1, le=20, description="valid calls per tool")
    dual_check: bool = True
    dual_rounds: int = Field(30, ge=1)
    dual_threshold: float = Field(0.85, ge=0, le=1)

    # --- ScenGenerator ----------------------------------------------------------------------------
    configs_per_env: int = Field(10, ge=1, le=500)

    # --- sandboxes --------------------------------------------------------------------------------
    sandbox_concurrency: int = Field(4, ge=1, description="sandboxes in use at once")

    @field_validator("base_url", "transcript", "created", "max_tokens", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("splits")
    @classmethod
    def _valid_splits(cls, splits: dict[str, float]) -> dict[str, float]:
        unknown = set(splits) - {"train", "rl", "eval"}
        if unknown:
            raise ValueError(f"unknown splits {sorted(unknown)}; use train, rl and eval")
        if any(share < 0 for share in splits.values()) or sum(splits.values()) <= 0:
            raise ValueError("split shares must be non-negative with a positive sum")
        return splits

    @model_validator(mode="after")
    def _transcript_when_needed(self) -> SynthSettings:
        if self.mode in ("record", "replay") and self.transcript is None:
            raise ValueError(f"mode {self.mode!r} needs ENVSCALER_SYNTH_TRANSCRIPT")
        return self

    def stage_model(self, stage: str) -> StageModel:
        """The model settings of ``stage``: the longest matching key of ``stages`` wins."""
        resolved: dict[str, object] = {}
        parts = stage.split(".")
        for end in range(1, len(parts) + 1):
            override = self.stages.get(".".join(parts[:end]))
            if override is not None:
                resolved.update(override.model_dump(exclude_none=True))
        return StageModel(
            stage=stage,
            model=str(resolved.get("model", self.model)),
            temperature=float(resolved.get("temperature", self.temperature)),  # type: ignore[arg-type]
            concurrency=int(resolved.get("concurrency", self.concurrency)),  # type: ignore[call-overload]
            max_attempts=int(resolved.get("max_attempts", self.max_attempts)),  # type: ignore[call-overload]
        )

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Dollars for a call, or None when no price is configured for ``model``."""
        price = self.costs.get(model)
        if price is None:
            return None
        return (prompt_tokens * price.input + completion_tokens * price.output) / 1000
