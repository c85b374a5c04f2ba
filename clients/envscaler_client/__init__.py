"""Python client for the EnvScaler gateway. Depends on httpx and pydantic only."""

__version__ = "0.1.0"
