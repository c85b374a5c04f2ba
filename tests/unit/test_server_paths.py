"""The session paths, matched in one place (`envscaler.server.paths`)."""

from __future__ import annotations

from envscaler.server.paths import CALLS, MCP, session_of, session_path


def test_session_paths_and_their_ids() -> None:
    assert session_path(CALLS) == "/v1/sessions/{session_id}/calls"
    assert session_of("/v1/sessions/abc/calls", CALLS) == "abc"
    assert session_of("/v1/sessions/abc/mcp", MCP) == "abc"
    for other in ("/v1/sessions/calls", "/v1/sessions//calls", "/v1/sessions/a/b/calls",
                  "/v1/sessions/abc/calls/", "/v1/sessions/abc/mcp", "/v2/sessions/abc/calls",
                  "/v1/sessionsabc/calls", "/nemo-gym/abc/calls"):
        assert session_of(other, CALLS) is None, other
