"""SkelBuilder and ScenGenerator: environment synthesis against OpenAI-compatible endpoints."""
