"""The web page (``/ui/``) in a real headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by selenium) against a real gateway process on loopback.

- the playground, clicked through with the reference solution of ``library_loans-001``, reaches
  reward 1.0 with every check passed, and the gateway's trajectory holds exactly the solution's
  arguments (the forms generated from the schemas send what the user typed, typed); its diff
  shows each change once (not again under ``init_config``, which shares the state's tables); a
  required field left empty is marked and nothing is sent;
- the catalogue renders environment data that a model wrote, markup included, as text only, under
  a Content-Security-Policy that the browser enforces (no violation reported), and no word of its
  tables is split across lines;
- the operator view shows the pool level and call counts of ``/readyz`` and ``/metrics``, the
  busiest tools (filtered on demand) and charts of the calls, latency, rewards and errors since it
  opened;
- with API keys set the page asks for a key, refuses a wrong one with the gateway's message, and
  keeps the right one in this tab's sessionStorage only.

``ENVSCALER_WEB_SCREENSHOTS=DIR`` keeps the screenshots there (the README's come from
``docs/web``); otherwise they go to the test's temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait

from envscaler.server.web import CONTENT_SECURITY_POLICY
from tests.deadlines import scaled
from tests.integration.gateway_fixtures import (
    COUNTER,
    LIBRARY,
    REPO_ROOT,
    GatewayProcess,
    build_catalogue,
    gateway_process,
    running_gateway,
)

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCENARIO = "library_loans-001"
API_KEY = "web-page-test-key"
WAIT = 30.0
TOOL_ROWS = 10  # app.js: the busiest rows the operator view shows
# The words of the cells matched by arguments[0] that are split across two lines (a line may
# end after a hyphen: "non-" and "terminated" are words of their own here).
BROKEN_WORDS = """
const broken = [];
for (const cell of document.querySelectorAll(arguments[0])) {
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const match of node.data.matchAll(/[^\\s-]+-?/g)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      if (new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size > 1) {
        broken.push(match[0]);
      }
    }
  }
}
return broken;
"""
MARKUP = ('<img src="x" id="pwned" onerror="document.title=\'pwned\'">'
          "<script>document.title='pwned'</script><b>bold</b>")


@pytest.fixture(scope="module")
def catalogue_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole catalogue, and counter_lab with markup in every text a model would write."""
    from envscaler.format import load_env, sync_manifest

    root = build_catalogue(tmp_path_factory.mktemp("web-catalogue") / "envs")
    for folder in sorted((REPO_ROOT / "generated_envs").iterdir()):
        if (folder / "env.py").is_file() and not (root / folder.name).exists():
            shutil.copytree(folder, root / folder.name)
    env_dir = root / COUNTER
    source = (env_dir / "env.py").read_text()
    (env_dir / "env.py").write_text(source.replace('"""Add to a named counter.',
                                                   f'"""Add to a named counter. {MARKUP}'))
    manifest = json.loads((env_dir / "env.json").read_text())
    manifest["summary"] = f"Counters {MARKUP}"
    manifest["introduction"] = f"An introduction {MARKUP}"
    manifest["constraint_rules"] = [f"A rule {MARKUP}"]
    (env_dir / "env.json").write_text(json.dumps(manifest))
    lines = (env_dir / "scenarios.jsonl").read_text().splitlines()
    scenarios = [json.loads(line) for line in lines]
    scenarios[0]["task"] = f"A task {MARKUP}"
    scenarios[0]["checklist"][0]["item"] = f"Has a check {MARKUP}?"
    (env_dir / "scenarios.jsonl").write_text("".join(json.dumps(s) + "\n" for s in scenarios))
    sync_manifest(env_dir)
    load_env(env_dir, strict=True)
    return root


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("ENVSCALER_WEB_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WebDriver]:
    """Headless Chromium; its console (CSP violations, script errors) is readable by the test."""
    monkeypatch.setenv("SE_OFFLINE", "true")  # selenium must not look anything up online
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage", "--window-size=1400,1000",
                 f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(CHROMEDRIVER, log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(scaled(WAIT))
    try:
        yield driver
    finally:
        driver.quit()


def web_gateway(make_settings: Callable[..., Any], tmp_path: Path,
                **overrides: Any) -> AbstractContextManager[GatewayProcess]:
    return gateway_process(make_settings(pool_size=2, **overrides), tmp_path / "gateway.log")


@pytest.fixture
def gateway(make_settings: Callable[..., Any], tmp_path: Path) -> Iterator[GatewayProcess]:
    with web_gateway(make_settings, tmp_path) as process:
        yield process


def wait_until(driver: WebDriver, condition: Callable[[WebDriver], Any], what: str) -> Any:
    try:
        return WebDriverWait(driver, scaled(WAIT)).until(condition)
    except WebDriverException as exc:
        notice = driver.find_element(By.ID, "notice").text
        raise AssertionError(f"{what}: not within {scaled(WAIT):g} s (page notice: {notice!r})"
                             ) from exc


def idle(driver: WebDriver) -> bool:
    """The playground's last action has finished."""
    return driver.find_element(By.ID, "view-playground").get_attribute("data-busy") is None


def console_problems(driver: WebDriver) -> list[str]:
    """Console lines that reveal a CSP or Trusted Types violation, or a script error."""
    return [entry["message"] for entry in driver.get_log("browser")
            if entry["level"] == "SEVERE" or "Content Security Policy" in entry["message"]
            or "TrustedHTML" in entry["message"]]


def screenshot(driver: WebDriver, path: Path) -> None:
    """The whole page, not only the window."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(int(height), 800), 4000))
    driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)


def fill(field: WebElement, value: Any) -> None:
    """Type a value into a generated form field as a person would."""
    if field.tag_name == "select":
        Select(field).select_by_visible_text(json.dumps(value))
        return
    field.clear()
    field.send_keys(json.dumps(value) if field.tag_name == "textarea" else str(value))


def solution_of(scenario_id: str) -> list[dict[str, Any]]:
    path = REPO_ROOT / "generated_envs" / LIBRARY / "scenarios.jsonl"
    for line in path.read_text().splitlines():
        scenario = json.loads(line)
        if scenario["id"] == scenario_id:
            return scenario["solution"]
    raise AssertionError(f"no scenario {scenario_id}")


def open_page(driver: WebDriver, gateway: GatewayProcess, view: str) -> None:
    driver.get(f"{gateway.url}/#{view}")  # `/` redirects to /ui/
    wait_until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#env-list button.env"),
               "the catalogue loaded")


def test_playground_reaches_reward_one_with_the_reference_solution(
    browser: WebDriver, gateway: GatewayProcess, screenshots: Path
) -> None:
    solution = solution_of(SCENARIO)
    open_page(browser, gateway, "playground")
    Select(browser.find_element(By.ID, "pg-env")).select_by_value(LIBRARY)
    wait_until(browser, lambda d: d.find_elements(
        By.CSS_SELECTOR, f'#pg-scenario option[value="{SCENARIO}"]'), "scenarios listed")
    Select(browser.find_element(By.ID, "pg-scenario")).select_by_value(SCENARIO)
    browser.find_element(By.ID, "pg-open").click()
    wait_until(browser, lambda d: d.find_element(By.ID, "pg-status").text == "active" and idle(d),
               "session opened")
    session_id = browser.find_element(By.ID, "pg-session-id").text
    assert "Priya Raman" in browser.find_element(By.ID, "pg-task").text
    assert browser.find_element(By.ID, "pg-diff").get_attribute("data-changes") == "0"

    for number, step in enumerate(solution, start=1):
        Select(browser.find_element(By.ID, "pg-tool")).select_by_value(step["name"])
        for name, value in step["arguments"].items():
            fill(browser.find_element(By.CSS_SELECTOR, f'[data-arg="{name}"]'), value)
        browser.find_element(By.ID, "pg-call").click()
        wait_until(browser, lambda d, n=number: idle(d) and len(
            d.find_elements(By.CSS_SELECTOR, "#pg-log li")) == n, f"call {number} answered")
        assert browser.find_element(By.ID, "pg-result").get_attribute("data-index") is not None

    changes = int(browser.find_element(By.ID, "pg-diff").get_attribute("data-changes"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#pg-diff tbody tr")
    paths = [row.get_attribute("data-path") for row in rows]
    assert changes == len(rows) > 0 and len(set(paths)) == len(paths)
    # The state's tables are also init_config's: the change is shown once, its copy named.
    [email] = [row for row in rows if "priya.raman@fastmail.example" in row.text]
    assert not email.get_attribute("data-path").startswith("init_config.")
    assert f"also init_config.{email.get_attribute('data-path')}" in email.text
    assert not [path for path in paths if path.startswith("init_config.")]

    browser.find_element(By.ID, "pg-validate").click()
    reward = wait_until(browser, lambda d: d.find_element(By.ID, "pg-reward")
                        .get_attribute("data-reward"), "validated")
    verdicts = [li.get_attribute("data-passed")
                for li in browser.find_elements(By.CSS_SELECTOR, "#pg-checks li")]
    screenshot(browser, screenshots / "playground.png")
    assert float(reward) == 1.0
    assert verdicts == ["true"] * 4

    trajectory = httpx.get(f"{gateway.url}/v1/sessions/{session_id}/trajectory",
                           timeout=scaled(10)).json()
    calls = [(e["name"], e["arguments"]) for e in trajectory["entries"] if e["kind"] == "call"]
    assert calls == [(s["name"], s["arguments"]) for s in solution]

    browser.find_element(By.ID, "pg-reset").click()
    wait_until(browser, lambda d: d.find_element(By.ID, "pg-epoch").text == "1" and idle(d),
               "reset")
    assert browser.find_element(By.ID, "pg-diff").get_attribute("data-changes") == "0"
    assert browser.find_elements(By.CSS_SELECTOR, "#pg-log li") == []

    browser.find_element(By.ID, "pg-close").click()
    wait_until(browser, lambda d: d.find_element(By.ID, "pg-status").text == "closed", "closed")
    record = httpx.get(f"{gateway.url}/v1/sessions/{session_id}", timeout=scaled(10)).json()
    assert record["status"] == "closed"
    assert console_problems(browser) == []


def test_a_refused_call_names_its_field_and_leaves_the_session_usable(
    browser: WebDriver, gateway: GatewayProcess
) -> None:
    open_page(browser, gateway, "playground")
    Select(browser.find_element(By.ID, "pg-env")).select_by_value(COUNTER)
    wait_until(browser, lambda d: d.find_elements(
        By.CSS_SELECTOR, '#pg-scenario option[value="counter-1"]'), "scenarios listed")
    browser.find_element(By.ID, "pg-open").click()
    wait_until(browser, lambda d: d.find_element(By.ID, "pg-status").text == "active" and idle(d),
               "session opened")
    Select(browser.find_element(By.ID, "pg-tool")).select_by_value("increment")
    browser.find_element(By.ID, "pg-call").click()  # the required name left empty
    notice = wait_until(browser, lambda d: idle(d) and d.find_element(By.ID, "notice").text,
                        "the missing field shown")
    assert "MissingArguments" in notice and "name" in notice
    name_field = browser.find_element(By.CSS_SELECTOR, '[data-field="name"]')
    assert "invalid" in name_field.get_attribute("class")
    assert browser.find_elements(By.CSS_SELECTOR, "#pg-log li") == []  # nothing was sent
    fill(browser.find_element(By.CSS_SELECTOR, '[data-arg="name"]'), "a")
    fill(browser.find_element(By.CSS_SELECTOR, '[data-arg="by"]'), 2.5)  # not an integer
    browser.find_element(By.ID, "pg-call").click()
    notice = wait_until(browser, lambda d: idle(d) and d.find_element(By.ID, "notice").text,
                        "the refusal shown")
    assert "InvalidArguments (422)" in notice and "by" in notice
    field = browser.find_element(By.CSS_SELECTOR, '[data-field="by"]')
    assert "invalid" in field.get_attribute("class")
    assert "invalid" not in name_field.get_attribute("class")
    fill(browser.find_element(By.CSS_SELECTOR, '[data-arg="by"]'), 2)
    browser.find_element(By.ID, "pg-call").click()
    wait_until(browser, lambda d: idle(d) and len(d.find_elements(By.CSS_SELECTOR,
                                                                  "#pg-log li")) == 1,
               "the corrected call answered")
    assert browser.find_element(By.ID, "notice").is_displayed() is False
    assert json.loads(browser.find_element(By.ID, "pg-result").text)["data"]["value"] == 3
    session_id = browser.find_element(By.ID, "pg-session-id").text
    trajectory = httpx.get(f"{gateway.url}/v1/sessions/{session_id}/trajectory",
                           timeout=scaled(10)).json()
    assert [e["arguments"] for e in trajectory["entries"] if e["kind"] == "call"] == [
        {"name": "a", "by": 2}]  # the refused attempts reached nothing


def test_catalogue_renders_model_written_text_as_text_under_a_strict_csp(
    browser: WebDriver, gateway: GatewayProcess, screenshots: Path
) -> None:
    answer = httpx.get(f"{gateway.url}/ui/", timeout=scaled(10))
    assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY

    open_page(browser, gateway, "catalogue")
    browser.find_element(By.CSS_SELECTOR, f'button.env[data-env="{COUNTER}"]').click()
    wait_until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#env-scenarios details"),
               "the environment shown")
    detail = browser.find_element(By.ID, "env-detail")
    assert f"A rule {MARKUP}" in browser.find_element(By.ID, "env-rules").text
    assert f"An introduction {MARKUP}" in detail.text
    tool = browser.find_element(By.CSS_SELECTOR, '#env-tools details[data-tool="increment"]')
    tool.find_element(By.TAG_NAME, "summary").click()
    assert MARKUP in tool.text and "by" in tool.text and "integer" in tool.text
    scenario = browser.find_element(By.CSS_SELECTOR,
                                    '#env-scenarios details[data-scenario="counter-1"]')
    scenario.find_element(By.TAG_NAME, "summary").click()
    wait_until(browser, lambda d: scenario.find_elements(By.CSS_SELECTOR, ".checklist li"),
               "the checklist loaded")
    items = [li.find_element(By.CSS_SELECTOR, ".item").text
             for li in scenario.find_elements(By.CSS_SELECTOR, ".checklist li")]
    assert items == [f"Has a check {MARKUP}?", "Has counter b been created?"]
    assert f"A task {MARKUP}" in scenario.text
    # Nothing of the markup became an element, and no script of it ran.
    assert browser.find_elements(By.ID, "pwned") == []
    assert browser.find_elements(By.CSS_SELECTOR,
                                 "#env-detail b, #env-detail img, #env-detail script") == []
    assert browser.title == "EnvScaler"
    assert console_problems(browser) == []
    # The browser enforces the policy: an HTML sink throws (Trusted Types) instead of parsing.
    sink = browser.execute_script(
        "try { document.body.insertAdjacentHTML('beforeend', '<i id=\"sink\"></i>');"
        " return 'parsed' } catch (e) { return e.name }")
    assert sink == "TypeError" and browser.find_elements(By.ID, "sink") == []

    for env in httpx.get(f"{gateway.url}/v1/envs", timeout=scaled(10)).json()["envs"]:
        browser.find_element(By.CSS_SELECTOR, f'button.env[data-env="{env["id"]}"]').click()
        wait_until(browser, lambda d, e=env["id"]: d.find_element(By.ID, "env-title").text == e,
                   f"{env['id']} shown")
        assert browser.execute_script(BROKEN_WORDS, "#env-detail td") == [], env["id"]
    browser.find_element(By.CSS_SELECTOR, f'button.env[data-env="{LIBRARY}"]').click()
    wait_until(browser, lambda d: d.find_element(By.ID, "env-title").text == LIBRARY,
               "library_loans shown")
    rules = browser.find_elements(By.CSS_SELECTOR, "#env-rules li")
    manifest = httpx.get(f"{gateway.url}/v1/envs/{LIBRARY}", timeout=scaled(10)).json()
    assert [li.text for li in rules] == manifest["constraint_rules"]
    browser.find_element(By.CSS_SELECTOR,
                         '#env-tools details[data-tool="search_books"] summary').click()
    scenario = browser.find_element(By.CSS_SELECTOR,
                                    f'#env-scenarios details[data-scenario="{SCENARIO}"]')
    browser.execute_script("arguments[0].scrollIntoView()", scenario)
    scenario.find_element(By.TAG_NAME, "summary").click()
    wait_until(browser, lambda d: scenario.find_elements(By.CSS_SELECTOR, ".checklist li"),
               "the checklist loaded")
    browser.execute_script("window.scrollTo(0, 0)")
    screenshot(browser, screenshots / "catalogue.png")

    scenario.find_element(By.CSS_SELECTOR, "button.try").click()  # "Open in the playground"
    wait_until(browser, lambda d: d.find_element(By.ID, "view-playground").is_displayed(),
               "the playground shown")
    assert browser.find_element(By.ID, "pg-env").get_attribute("value") == LIBRARY
    assert browser.find_element(By.ID, "pg-scenario").get_attribute("value") == SCENARIO


# The operator view as one snapshot: it is redrawn every 2 s, so element by element reads race.
OPERATOR_SNAPSHOT = """
const text = (selector) => document.querySelector(selector)?.textContent ?? null;
const cards = {};
for (const card of document.querySelectorAll("#op-grid .card")) {
  cards[card.id] = {figure: card.querySelector(".figure").textContent, text: card.innerText};
}
const charts = {};
for (const chart of document.querySelectorAll("#op-charts .chart-card")) {
  charts[chart.id.slice("op-chart-".length)] = {
    values: JSON.parse(chart.dataset.values), lines: chart.querySelectorAll("polyline").length};
}
return {cards, charts, shown: text("#op-tools-shown"),
        rows: [...document.querySelectorAll("#op-tools tbody tr")].map(
          (tr) => [...tr.cells].map((td) => td.textContent))};
"""


def operator_view(driver: WebDriver) -> dict[str, Any]:
    return driver.execute_script(OPERATOR_SNAPSHOT)


def measured(view: dict[str, Any], chart: str) -> list[float]:
    return [value for value in view["charts"][chart]["values"] if value is not None]


def test_operator_view_shows_the_pool_the_busiest_tools_and_charts_of_the_metrics(
    browser: WebDriver, gateway: GatewayProcess, screenshots: Path
) -> None:
    def polls(count: int) -> None:  # the charts have this many points (one per 2 s poll)
        wait_until(browser, lambda d: len(operator_view(d)["charts"].get("calls", {}).get(
            "values", [])) >= count, f"{count} polls charted")

    open_page(browser, gateway, "operator")  # open first: the charts show what happens after
    polls(1)
    with httpx.Client(base_url=gateway.url, timeout=scaled(30)) as client:
        session = client.post("/v1/sessions", json={"env": COUNTER, "scenario": "counter-1"}).json()
        # a: 1 -> 3 passes one check of two; b is never created
        for arguments in [{"name": "a", "by": 2}] + [{"name": "c"}] * 4:
            client.post(f"/v1/sessions/{session['session_id']}/calls",
                        json={"name": "increment", "arguments": arguments}).raise_for_status()
        polls(3)  # the calls, then the validation and the other calls in later polls
        client.post(f"/v1/sessions/{session['session_id']}/validate").raise_for_status()
        library = client.post("/v1/sessions", json={"env": LIBRARY, "scenario": SCENARIO}).json()
        tools = [tool["function"] for tool in library["tools"]]
        for tool in tools:  # each once: a tool's own error is a call too
            arguments = {name: "none" for name in tool["parameters"].get("required", [])}
            client.post(f"/v1/sessions/{library['session_id']}/calls",
                        json={"name": tool["name"], "arguments": arguments}).raise_for_status()
        pool = client.get("/readyz").json()["pool"]
    assert len(tools) + 1 > TOOL_ROWS  # more rows than the view shows
    calls = 5 + len(tools)
    view = wait_until(browser, lambda d: (v := operator_view(d))["cards"] and f"total {calls}" in
                      v["cards"]["op-calls"]["text"] and 0.5 in measured(v, "reward") and v,
                      "the calls and the reward in a chart")
    cards = view["cards"]
    assert cards["op-ready"]["figure"] == "ready"
    assert cards["op-pool"]["figure"].endswith(f"/ {pool['target']}")
    assert f"of {pool['capacity']}" in cards["op-pool"]["text"]
    assert cards["op-live"]["figure"] == "2"
    assert cards["op-validations"]["figure"] == "1"
    assert "mean reward 0.500" in cards["op-validations"]["text"]
    assert cards["op-errors"]["figure"] == "0"

    # Charts over the polls since the view opened, drawn in SVG by the page itself.
    assert measured(view, "reward") == [0.5]
    assert max(measured(view, "calls")) > 0 and measured(view, "latency")
    assert set(measured(view, "errors")) == {0}
    assert all(view["charts"][key]["lines"] for key in ("calls", "latency", "reward", "errors"))

    # The busiest rows only, and any of them through the filter.
    assert len(view["rows"]) == TOOL_ROWS and view["rows"][0][:3] == [COUNTER, "increment", "5"]
    assert {row[1] for row in view["rows"][1:]} < {tool["name"] for tool in tools}
    assert view["shown"] == f"{TOOL_ROWS} busiest of {len(tools) + 1}"
    polls(len(view["charts"]["calls"]["values"]) + 2)  # some history for the screenshot
    screenshot(browser, screenshots / "operator.png")
    browser.find_element(By.ID, "op-tool-filter").send_keys("update_member")
    view = wait_until(browser, lambda d: len((v := operator_view(d))["rows"]) == 1 and v,
                      "the filter applied")
    assert view["rows"][0][:3] == [LIBRARY, "update_member_contact", "1"]
    assert view["shown"] == f"1 of 1 matching, {len(tools) + 1} in all"
    assert console_problems(browser) == []


def test_with_api_keys_the_page_asks_for_a_key_and_keeps_it_for_the_tab_only(
    browser: WebDriver, make_settings: Callable[..., Any], tmp_path: Path
) -> None:
    with web_gateway(make_settings, tmp_path, api_keys=[API_KEY]) as gateway:
        browser.get(f"{gateway.url}/ui/")
        wait_until(browser, lambda d: d.find_element(By.ID, "auth").is_displayed(), "key asked")
        assert browser.find_elements(By.CSS_SELECTOR, "#env-list button.env") == []
        browser.find_element(By.ID, "auth-key").send_keys("not-the-key")
        browser.find_element(By.ID, "auth-submit").click()
        wait_until(browser, lambda d: "unknown API key" in d.find_element(By.ID, "auth-error").text,
                   "a wrong key refused")
        browser.find_element(By.ID, "auth-key").send_keys(API_KEY)
        browser.find_element(By.ID, "auth-submit").click()
        wait_until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#env-list button.env"),
                   "the catalogue loaded with the key")
        assert not browser.find_element(By.ID, "auth").is_displayed()
        stored = browser.execute_script(
            "return [sessionStorage.getItem('envscaler.apiKey'), localStorage.length, "
            "document.cookie]")
        assert stored == [API_KEY, 0, ""]
        browser.switch_to.new_window("tab")  # another tab of the same browser: no key
        browser.get(f"{gateway.url}/ui/")
        wait_until(browser, lambda d: d.find_element(By.ID, "auth").is_displayed(),
                   "the key asked again in a new tab")
        assert [line for line in console_problems(browser) if " 401 " not in line] == []


async def test_the_page_is_off_when_web_ui_is_false(make_settings: Callable[..., Any]) -> None:
    async with running_gateway(make_settings(web_ui=False)) as (_, client):
        assert (await client.get("/ui/")).status_code == 404
        assert (await client.get("/")).status_code == 404
        assert (await client.get("/v1/envs")).status_code == 200
    async with running_gateway(make_settings()) as (_, client):
        home = await client.get("/")
        assert home.status_code == 307 and home.headers["location"] == "/ui/"
        for path in ("/ui/", "/ui/app.js", "/ui/style.css", "/ui/missing.js"):
            answer = await client.get(path)
            assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY, path
            assert answer.headers["x-content-type-options"] == "nosniff", path


async def test_a_scenario_detail_gives_its_checklist_to_api_keys_only(
    make_settings: Callable[..., Any]
) -> None:
    async with running_gateway(make_settings()) as (_, client):
        detail = (await client.get(f"/v1/envs/{COUNTER}/scenarios/counter-2")).json()
        assert detail == {
            "env": COUNTER, "id": "counter-2", "split": "eval", "task": "Bring counter z to 11.",
            "verified": True, "clock_start": "2025-01-01T09:00:00+00:00",
            "checklist": [{"item": "Has counter z reached 11?", "check_func": "def check_func("
                           "final_state):\n    return final_state['counters'].get('z') == 11\n"}],
        }
        unknown = await client.get(f"/v1/envs/{COUNTER}/scenarios/counter-9")
        assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "UnknownScenario"
        created = await client.post("/v1/sessions", json={"env": COUNTER, "scenario": "counter-2"})
        agent = {"Authorization": f"Bearer {created.json()['agent_token']}"}
        refused = await client.get(f"/v1/envs/{COUNTER}/scenarios/counter-2", headers=agent)
        assert refused.status_code == 403 and refused.json()["error"]["type"] == "Forbidden"
        await client.delete(f"/v1/sessions/{created.json()['session_id']}")
        operation = (await client.get("/openapi.json")).json()["paths"][
            "/v1/envs/{env}/scenarios/{scenario}"]["get"]
        assert operation["summary"] and {"401", "403", "404"} <= set(operation["responses"])
