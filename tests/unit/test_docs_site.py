"""The manual (`docs/`, built by MkDocs from `mkdocs.yml`): it builds in strict mode, a broken
link or anchor fails that build, and claims of its pages hold against the code: the configuration
page against `Settings` (every setting, with its default, and no variable the code does not read),
the error table against `envscaler/server/errors.py` and every `ApiError` the code raises, and the
route table against the routers."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from envscaler.checkout import REPO_ROOT
from envscaler.server.settings import Settings
from envscaler.synth.settings import SynthSettings

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CONFIG = ROOT / "mkdocs.yml"
CONFIGURATION_PAGE = DOCS / "configuration.md"
HTTP_PAGE = DOCS / "http-api.md"
PACKAGE = ROOT / "envscaler"
ERRORS_MODULE = PACKAGE / "server" / "errors.py"
HTTP_MODULE = PACKAGE / "server" / "http.py"
# Where a variable that is not a gateway setting must be read for the configuration page to name
# it: the code and the files that configure it (never the manual, the README or the tests).
CODE = [PACKAGE, ROOT / "clients", ROOT / "scripts", ROOT / "docker-compose.yml",
        ROOT / "Dockerfile"]
BUILD_TIMEOUT = 120.0  # seconds; a build takes about 2 s


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site)],
        cwd=config.parent, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)


def nav_pages(nav: Any) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from nav_pages(value)


def built_page(site: Path, page: str) -> Path:
    """Where MkDocs writes ``page`` (directory URLs: ``a/b.md`` is ``a/b/index.html``)."""
    stem = page.removesuffix(".md")
    if stem == "index" or stem.endswith("/index"):
        return site / stem.removesuffix("index") / "index.html"
    return site / stem / "index.html"


# --- the build -----------------------------------------------------------------------------------


def test_the_manual_builds_in_strict_mode_with_every_page(tmp_path: Path) -> None:
    config = yaml.safe_load(CONFIG.read_text())
    assert config["strict"] is True
    checks = {f"{group}.{name}": level for group, levels in config["validation"].items()
              for name, level in levels.items()}
    assert checks and set(checks.values()) == {"warn"}, checks  # warnings fail a strict build
    assert config["theme"]["name"] in ("mkdocs", "readthedocs")  # MkDocs' own themes only
    site = tmp_path / "site"
    result = mkdocs_build(CONFIG, site)
    assert result.returncode == 0, result.stdout + result.stderr
    pages = list(nav_pages(config["nav"]))
    assert "index.md" in pages and len(pages) >= 15
    for page in pages:
        assert (DOCS / page).is_file(), page
        assert built_page(site, page).is_file(), page
    images = [image for page in pages if not page.startswith("bench/")
              for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", (DOCS / page).read_text())]
    assert "web/playground.png" in images and "bench/quick/calls.png" in images


def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    shutil.copy(CONFIG, tmp_path / CONFIG.name)
    shutil.copytree(DOCS, tmp_path / "docs")
    with open(tmp_path / "docs" / "index.md", "a", encoding="utf-8") as index:
        index.write("\n[a heading](sessions.md#no-such-heading) and "
                    "[a page](no-such-page.md)\n")
    result = mkdocs_build(tmp_path / CONFIG.name, tmp_path / "site")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "#no-such-heading" in output and "no-such-page.md" in output, output


# --- the configuration page ---------------------------------------------------------------------


def table_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row of ``text`` (separator rows left out)."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|") or re.fullmatch(r"[|\s:-]+", line):
            continue
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def settings_by_variable() -> dict[str, Any]:
    prefix = Settings.model_config["env_prefix"]
    return {f"{prefix}{name}".upper(): field for name, field in Settings.model_fields.items()}


def documented_defaults() -> dict[str, str]:
    """Each variable named in the first cell of a row of the page's tables, and that row's
    second cell (its default)."""
    defaults = {}
    for cells in table_rows(CONFIGURATION_PAGE.read_text()):
        for variable in re.findall(r"`(ENVSCALER_[A-Z0-9_]+)`", cells[0]):
            defaults[variable] = cells[1] if len(cells) > 1 else ""
    return defaults


def default_forms(value: Any) -> set[str] | None:
    """How the page may write a setting's default; None: unset."""
    if value is None or value == []:
        return None
    if isinstance(value, bool):
        return {str(value).lower()}
    if isinstance(value, int | float):
        return {str(value), f"{value:g}"}
    if isinstance(value, list):
        return {",".join(str(item) for item in value)}
    if isinstance(value, Path):
        forms = {str(value)}
        if value.is_relative_to(Path.home()):
            forms.add(f"~/{value.relative_to(Path.home())}")
        if value.is_relative_to(REPO_ROOT):  # the checkout's own folder, as `folder/`
            forms.add(f"{value.relative_to(REPO_ROOT)}/")
        return forms
    return {str(value)}


def test_every_setting_is_on_the_configuration_page_with_its_default() -> None:
    documented = documented_defaults()
    settings = settings_by_variable()
    missing = sorted(set(settings) - set(documented))
    assert not missing, f"settings missing from {CONFIGURATION_PAGE.name}: {missing}"
    wrong = {}
    for variable, field in settings.items():
        cell = documented[variable]
        forms = default_forms(field.get_default(call_default_factory=True))
        if forms is None:
            if not cell.startswith("unset"):
                wrong[variable] = (cell, "unset")
            continue
        shown = re.search(r"`([^`]*)`", cell)
        if shown is None or shown.group(1) not in forms:
            wrong[variable] = (cell, sorted(forms))
    assert not wrong, f"defaults the page gets wrong (page, code): {wrong}"


def code_text() -> str:
    files: list[Path] = []
    for place in CODE:
        files += [place] if place.is_file() else [p for p in place.rglob("*") if p.is_file()
                                                  and "__pycache__" not in p.parts]
    return "\n".join(path.read_text(errors="replace") for path in files)


def test_the_configuration_page_names_no_variable_that_nothing_reads() -> None:
    text = CONFIGURATION_PAGE.read_text()
    names = set(re.findall(r"ENVSCALER_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_*])", text))
    prefixes = set(re.findall(r"(ENVSCALER_[A-Z0-9_]*_)\*", text))
    settings = set(settings_by_variable())
    assert settings <= names
    code = code_text()
    unread = sorted(name for name in names - settings
                    if not re.search(rf"\b{name}\b", code))
    assert not unread, f"variables the page names that no code reads: {unread}"
    unknown = sorted(prefix for prefix in prefixes
                     if not any(name.startswith(prefix) for name in settings)
                     and prefix not in code)
    assert not unknown, f"variable families no code reads: {unknown}"


def test_the_synthesis_settings_are_exactly_synthsettings_fields() -> None:
    text = CONFIGURATION_PAGE.read_text()
    paragraph = text[text.index("Synthesis reads `ENVSCALER_SYNTH_*`"):].split("\n\n", 1)[0]
    assert SynthSettings.model_config["env_prefix"] == "ENVSCALER_SYNTH_"
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]*)`", paragraph))
    fields = {name.upper() for name in SynthSettings.model_fields}
    assert documented == fields, (f"on the page only: {sorted(documented - fields)}; "
                                  f"in the code only: {sorted(fields - documented)}")


# --- the error table ----------------------------------------------------------------------------


def page_errors() -> set[tuple[str, int]]:
    pairs = set()
    for cells in table_rows(HTTP_PAGE.read_text()):
        if len(cells) >= 2 and re.fullmatch(r"`[A-Za-z]+`", cells[0]) and \
                re.fullmatch(r"\d{3}", cells[1]):
            pairs.add((cells[0].strip("`"), int(cells[1])))
    return pairs


def errors_py_table() -> set[tuple[str, int]]:
    """The table of `envscaler/server/errors.py`'s docstring."""
    tree = ast.parse(ERRORS_MODULE.read_text())
    docstring = ast.get_docstring(tree) or ""
    return {(kind, int(status)) for kind, status
            in re.findall(r"^([A-Z][A-Za-z]+)\s+(\d{3})\s", docstring, re.MULTILINE)}


def http_layer_types() -> set[tuple[str, int]]:
    """``_HTTP_TYPES`` of errors.py: the types of the HTTP layer's own refusals, by status."""
    tree = ast.parse(ERRORS_MODULE.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "_HTTP_TYPES" for t in targets):
                mapping = ast.literal_eval(node.value)
                return {(kind, status) for status, kind in mapping.items()}
    raise AssertionError("errors.py has no _HTTP_TYPES")


def read_deadline_answers() -> set[tuple[str, int]]:
    """The answer `envscaler/server/http.py` writes itself when a request's head or body is late."""
    source = HTTP_MODULE.read_text()
    statuses = re.findall(r"HTTP/1\.1 (\d{3}) ", source)
    kinds = re.findall(r'"type": "([A-Za-z]+)"', source)
    assert statuses and kinds
    return {(kind, int(status)) for kind in kinds for status in statuses}


def _called(node: ast.Call) -> str | None:
    function = node.func
    if isinstance(function, ast.Name):
        return function.id
    if isinstance(function, ast.Attribute):
        return function.attr
    return None


def _statuses(node: ast.expr) -> set[int]:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return {node.value}
    if isinstance(node, ast.IfExp):  # `429 if full else 503`
        return _statuses(node.body) | _statuses(node.orelse)
    return set()


def _argument(node: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(node.args) > position:
        return node.args[position]
    return next((kw.value for kw in node.keywords if kw.arg == keyword), None)


def raised_errors() -> set[tuple[str, int]]:
    """Every (type, status) of an ``ApiError`` the package constructs with a constant status: the
    type a string, a module's string constant, or a parameter of a helper (``not_found(type,
    ...)``), then taken from the helper's calls."""
    trees = {path: ast.parse(path.read_text()) for path in PACKAGE.rglob("*.py")}
    pairs: set[tuple[str, int]] = set()
    helpers: dict[str, Helper] = {}
    for tree in trees.values():
        constants = {target.id: node.value.value for node in tree.body
                     if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                     and isinstance(node.value.value, str)
                     for target in node.targets if isinstance(target, ast.Name)}
        functions = [node for node in ast.walk(tree)
                     if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
        for function in functions:
            helper = _helper(function)
            if helper is not None:
                helpers[function.name] = helper
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _called(node) == "ApiError"):
                continue
            status, kind = _argument(node, 0, "status"), _argument(node, 1, "type")
            if status is None or kind is None:
                continue
            if isinstance(kind, ast.Constant) and isinstance(kind.value, str):
                name = kind.value
            elif isinstance(kind, ast.Name) and kind.id in constants:
                name = constants[kind.id]
            else:
                continue
            pairs |= {(name, code) for code in _statuses(status)}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called(node) in helpers:
                pairs |= helpers[_called(node)].pairs(node)
    return pairs


@dataclass(frozen=True)
class Helper:
    """A function that constructs an ``ApiError`` from its parameters: its type a constant or a
    parameter, its status a constant or a parameter with a constant default."""

    kind: str | tuple[int, str]  # the type, or the (position, name) of the parameter giving it
    statuses: set[int]  # the constant statuses, or the status parameter's default
    status_parameter: tuple[int, str] | None

    def pairs(self, call: ast.Call) -> set[tuple[str, int]]:
        kind = self.kind
        if isinstance(kind, tuple):
            given = _argument(call, *kind)
            if not (isinstance(given, ast.Constant) and isinstance(given.value, str)):
                return set()
            kind = given.value
        statuses = self.statuses
        if self.status_parameter is not None:
            given = _argument(call, *self.status_parameter)
            statuses = _statuses(given) if given is not None else statuses
        return {(kind, code) for code in statuses}


def _helper(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Helper | None:
    """The function as a `Helper`, when it returns an ``ApiError`` built from its parameters."""
    parameters = [argument.arg for argument in function.args.args]
    defaults = dict(zip(reversed(parameters), reversed(function.args.defaults)))
    for node in ast.walk(function):
        if not (isinstance(node, ast.Call) and _called(node) == "ApiError"):
            continue
        status, kind = _argument(node, 0, "status"), _argument(node, 1, "type")
        if status is None or kind is None:
            continue
        status_parameter = None
        statuses = _statuses(status)
        if isinstance(status, ast.Name) and status.id in parameters:
            status_parameter = (parameters.index(status.id), status.id)
            statuses = _statuses(defaults[status.id]) if status.id in defaults else set()
        if isinstance(kind, ast.Name) and kind.id in parameters:
            return Helper((parameters.index(kind.id), kind.id), statuses, status_parameter)
        if status_parameter is not None and isinstance(kind, ast.Constant):
            return Helper(kind.value, statuses, status_parameter)
    return None


def test_the_error_table_gives_each_type_the_status_the_code_gives_it() -> None:
    raised = raised_errors()
    assert ("UnknownSession", 404) in raised and ("CapacityExhausted", 429) in raised  # the scan
    code = errors_py_table() | raised | http_layer_types() | read_deadline_answers()
    page = page_errors()
    missing = sorted(code - page)
    assert not missing, f"(type, status) pairs of the code missing from {HTTP_PAGE.name}: {missing}"
    unknown = sorted(page - code)
    assert not unknown, f"(type, status) pairs of {HTTP_PAGE.name} the code never gives: {unknown}"


def test_the_route_table_lists_every_rest_route() -> None:
    from envscaler.server.routes import envs, health, sessions

    rows = {(cells[0].strip("`"), cells[1].strip("`"))
            for cells in table_rows(HTTP_PAGE.read_text()) if len(cells) >= 2}
    routes = {(method, route.path) for module in (envs, health, sessions)
              for route in module.router.routes for method in route.methods}
    assert len(routes) >= 18
    missing = sorted(routes - rows)
    assert not missing, f"routes missing from {HTTP_PAGE.name}: {missing}"
    listed = {row for row in rows if row[0] in ("GET", "POST", "PUT", "PATCH", "DELETE")}
    assert listed <= routes, sorted(listed - routes)


def test_the_readme_links_to_pages_that_exist() -> None:
    """The README is outside the site, so MkDocs does not check its links: this does."""
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\((?!https?://)([^)#\s]+)(?:#[^)]*)?\)", readme)
    assert any(target.startswith("docs/") for target in targets)
    missing = sorted(target for target in targets if not (ROOT / target).exists())
    assert not missing, f"README links to files that do not exist: {missing}"

# --- the commands ---------------------------------------------------------------------------------


def manual_texts() -> dict[str, str]:
    pages = {str(path.relative_to(ROOT)): path.read_text() for path in DOCS.rglob("*.md")
             if "bench" not in path.relative_to(DOCS).parts}
    return {**pages, "README.md": (ROOT / "README.md").read_text()}


def envscaler_command_lines(text: str) -> Iterator[str]:
    """What follows ``envscaler`` in the page's shell blocks and inline code (comments dropped,
    continuation lines joined)."""
    for block in re.findall(r"```(?:sh|bash)?\n(.*?)```", text, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0]
            for match in re.finditer(r"(?:^|[\s;&|(])(?:\S*/)?envscaler((?: [^\s;&|)]+)+)", line):
                yield match.group(1)
    for span in re.findall(r"`envscaler( [^`]+)`", text):
        yield " " + " ".join(span.split())


def test_every_envscaler_command_in_the_manual_exists_with_its_options() -> None:
    import click
    import typer.main

    from envscaler.cli.main import app

    root = typer.main.get_command(app)
    problems = []
    for page, text in manual_texts().items():
        for line in envscaler_command_lines(text):
            words = line.split()
            command, context, depth = root, click.Context(root), 0
            while depth < len(words) and hasattr(command, "list_commands") and \
                    words[depth] in command.list_commands(context):
                command = command.get_command(context, words[depth])
                context, depth = click.Context(command, parent=context), depth + 1
            if depth == 0 or words[depth - 1] == "...":
                problems.append(f"{page}: envscaler{line}: no such command")
                continue
            known = {name for parameter in command.params
                     for name in (*parameter.opts, *getattr(parameter, "secondary_opts", []))}
            unknown = [word.split("=")[0] for word in words[depth:]
                       if re.fullmatch(r"--?[a-z][a-z-]*(=.*)?", word)
                       and word.split("=")[0] not in known]
            if unknown:
                problems.append(f"{page}: envscaler{line}: unknown options {unknown}")
    assert not problems, "\n".join(problems)
