"""SkelBuilder and ScenGenerator: environment synthesis against OpenAI-compatible endpoints."""

PIPELINE_VERSION = "envscaler-synth/0.1.0"
