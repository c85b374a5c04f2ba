"""Python client for the EnvScaler gateway, sync and async. Depends on httpx, httptools (the async
client's HTTP/1.1 parser) and pydantic only.

    from envscaler_client import EnvClient

    with EnvClient("http://127.0.0.1:8000", api_key=...) as client:
        with client.create_session("library_loans", scenario="library_loans-001") as session:
            print(session.task)
            result = session.call("get_member", {"member_id": "M-1001"})
            reward = session.validate().reward
"""

__version__ = "0.1.0"

from envscaler_client._protocol import DEFAULT_URL, connection_limits
from envscaler_client.aio import AsyncEnvClient, AsyncSession
from envscaler_client.client import EnvClient, Session
from envscaler_client.concurrency import SessionSpec, run_sessions
from envscaler_client.errors import (
    AuthError,
    CallTimeoutError,
    CapacityError,
    CheckExhaustedError,
    EnvScalerError,
    InvalidArgumentsError,
    NotFoundError,
    SessionClosedError,
    TransportError,
)
from envscaler_client.models import (
    CallResult,
    CheckResult,
    EnvDetail,
    EnvSummary,
    Health,
    Readiness,
    ResetResult,
    ScenarioSummary,
    SessionInfo,
    SessionState,
    ToolError,
    Trajectory,
    TrajectoryEntry,
    Validation,
)
from envscaler_client.retry import RetryPolicy
from envscaler_client.tools import async_tool_message, tool_message

__all__ = [
    "DEFAULT_URL",
    "AsyncEnvClient",
    "AsyncSession",
    "AuthError",
    "CallResult",
    "CallTimeoutError",
    "CapacityError",
    "CheckExhaustedError",
    "CheckResult",
    "EnvClient",
    "EnvDetail",
    "EnvScalerError",
    "EnvSummary",
    "Health",
    "InvalidArgumentsError",
    "NotFoundError",
    "Readiness",
    "ResetResult",
    "RetryPolicy",
    "ScenarioSummary",
    "Session",
    "SessionClosedError",
    "SessionInfo",
    "SessionSpec",
    "SessionState",
    "ToolError",
    "Trajectory",
    "TrajectoryEntry",
    "TransportError",
    "Validation",
    "__version__",
    "async_tool_message",
    "connection_limits",
    "run_sessions",
    "tool_message",
]
