"""The gateway's default logging: calls summed up per interval, no line per call or request."""

from __future__ import annotations

import logging

from envscaler.server.callsummary import CallSummary
from envscaler.server.http import gateway_options
from envscaler.server.settings import Settings


def test_a_window_of_calls_is_one_line(caplog):
    summary = CallSummary(interval=60)
    for seconds, ok in ((0.002, True), (0.004, False), (0.003, True)):
        summary.add(seconds, ok)
    with caplog.at_level(logging.INFO, logger="envscaler.server.calls"):
        summary.flush()
        summary.flush()  # a window with no call says nothing
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["calls summary window_s=60 calls=3 errors=1 mean_ms=3.00 max_ms=4.00"]


def test_no_access_line_per_request_unless_asked():
    assert gateway_options(Settings())["access_log"] is False
    assert gateway_options(Settings(access_log=True))["access_log"] is True
    assert gateway_options(Settings(access_log=True, log_level="WARNING"))["access_log"] is False
