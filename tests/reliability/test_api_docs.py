"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) served whole by the gateway (`envscaler.server.web.apidocs`),
in a real headless Chromium against a real gateway process on loopback, with no other origin to
reach: every script, style and image the pages name is the gateway's, answered with the docs'
Content-Security-Policy, and both pages render the gateway's operations with no CSP violation
or script error in the browser's console."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from envscaler.server.web.apidocs import DOCS_CONTENT_SECURITY_POLICY
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import GatewayProcess
from tests.reliability.test_web_page import WAIT, browser, console_problems, web_gateway

__all__ = ["browser"]  # the fixture, shared with the web page's tests

pytestmark = pytest.mark.parametrize("backend_kwargs", ["process"], indirect=True)

REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
REFERENCE = re.compile(r'(?:src|href|spec-url)="([^"]*)"')


@pytest.fixture
def gateway(make_settings: Callable[..., Any], tmp_path: Path) -> Iterator[GatewayProcess]:
    with web_gateway(make_settings, tmp_path) as process:
        yield process


def test_the_pages_name_only_the_gateway_s_own_files_served_under_the_csp(
        gateway: GatewayProcess) -> None:
    with httpx.Client(base_url=gateway.url, timeout=scaled(30)) as client:
        for page in ("/docs", "/redoc"):
            answer = client.get(page)
            assert answer.status_code == 200, answer.text
            assert answer.headers["content-security-policy"] == DOCS_CONTENT_SECURITY_POLICY
            assert "<script>" not in answer.text  # no inline script: the policy forbids it
            references = REFERENCE.findall(answer.text)
            assert references and all(ref.startswith("/") and not ref.startswith("//")
                                      for ref in references), references
            for reference in references:
                asset = client.get(reference)
                assert asset.status_code == 200, reference
                if reference.startswith("/docs-assets/"):
                    assert asset.headers["content-security-policy"] == \
                        DOCS_CONTENT_SECURITY_POLICY
    assert "script-src 'self';" in DOCS_CONTENT_SECURITY_POLICY
    assert "unsafe-eval" not in DOCS_CONTENT_SECURITY_POLICY


def test_swagger_ui_and_redoc_render_offline_with_no_csp_violation(
        browser: WebDriver, gateway: GatewayProcess) -> None:
    browser.get(f"{gateway.url}/docs")
    WebDriverWait(browser, WAIT).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".swagger-ui .opblock"))
    paths = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")]
    assert "/v1/sessions/{session_id}/calls" in paths, paths
    assert console_problems(browser) == []

    browser.get(f"{gateway.url}/redoc")
    WebDriverWait(browser, WAIT).until(
        lambda d: "Call a tool" in d.find_element(By.TAG_NAME, "body").text)
    # ReDoc's sidebar shows its maker's logo from a CDN, which the policy blocks (the logo then
    # hides itself): that refusal is the policy at work, and the only one
    problems = console_problems(browser)
    assert all(REDOC_LOGO in problem and "img-src" in problem for problem in problems), problems
