"""The gateway: FastAPI service with Redis-held sessions."""
