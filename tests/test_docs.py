"""The docs build with warnings as errors, offline, and say nothing the code does not back: every
setting, command, test, shell command and file they name exists."""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from app.api.openapi import document
from app.config import SETTINGS

ROOT = Path(__file__).resolve().parent.parent
# The MkDocs hook that writes the settings, command-line and HTTP API pages (docs/ is no package).
_spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
assert _spec is not None and _spec.loader is not None
hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hooks)
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md", ROOT / "bench" / "README.md"]
GENERATED = {uri: make for uri, make in hooks.GENERATED.items()}

# Environment variables the docs may name that are not settings of the app, each with who reads it.
OTHER_VARIABLES = {
    "OPENAI_API_KEY": "the OpenAI provider's own key variable (app/config.py PROVIDER_KEYS)",
    "ANTHROPIC_API_KEY": "the Anthropic provider's own key variable (app/config.py PROVIDER_KEYS)",
    "MODEL_API_KEY": "the variable COUNTERSIGN_MODEL_API_KEY is read from (app/config.py)",
    "COUNTERSIGN_TEST_REDIS_URL": "scripts/test and tests/conftest.py",
    "COUNTERSIGN_TEST_PG_URL": "scripts/test",
    "COUNTERSIGN_TEST_REDIS_DB": "scripts/services",
    "COUNTERSIGN_TEST_PG_DB": "scripts/services",
    "COUNTERSIGN_SCREENSHOTS": "the browser tests",
    "CHROMIUM_PATH": "the browser tests (tests/helpers/browser.py)",
    "COUNTERSIGN_FUZZ_EXAMPLES": "the fuzz and property tests",
    "COUNTERSIGN_BENCH_PG_URL": "bench/run.py",
    "COUNTERSIGN_TEST_WORKERS": "scripts/test",
    "COUNTERSIGN_TEST_DATABASE_ONLY": "scripts/test (its PostgreSQL pass) and tests/conftest.py",
    "COUNTERSIGN_DEMO": "app/config.py (the environment's name, from the .flaskenv scripts/demo writes)",
    "DEMO_SKIP_SETUP": "scripts/demo",
    "FLASK_APP": "Flask's own command (the .flaskenv scripts/demo writes)",
}

# Commands a reader would copy that this test checks without running, and why.
NOT_RUN = {
    "./scripts/demo": "serves the demo until stopped",
    "./scripts/test": "is the whole suite, this test among it",
    "apt-get": "installs system packages as root",
    "curl": "talks to a running server",
    "gunicorn": "serves until stopped (its app target is checked)",
    "uvicorn": "serves until stopped (its app target is checked)",
    "mkdocs serve": "serves the docs until stopped (the build is tested below)",
    "mkdocs build": "is what test_the_docs_build_with_warnings_as_errors runs",
    "flask run": "Flask's own development server, serving until stopped",
}

OFFLINE_BUILD = """
import socket, sys
def refuse(self, address, *rest):
    if not (isinstance(address, tuple) and str(address[0]) in ("127.0.0.1", "::1", "localhost")):
        raise OSError(f"the docs build may not reach {address!r}")
    return real(self, address, *rest)
real = socket.socket.connect
socket.socket.connect = refuse
from mkdocs.__main__ import cli
sys.exit(cli())
"""


def page_texts() -> dict[str, str]:
    """Every page a reader sees: the hand-written ones and the generated ones."""
    texts = {str(path.relative_to(ROOT)): path.read_text() for path in PAGES}
    texts.update({f"docs/{uri} (generated)": make() for uri, make in GENERATED.items()})
    return texts


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`mkdocs build --strict` into a temp dir, with every connection off this machine refused."""
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-c", OFFLINE_BUILD, "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result, site


def test_the_docs_build_with_warnings_as_errors(build):
    result, site = build
    log = result.stdout + result.stderr
    assert result.returncode == 0, log
    assert "WARNING" not in log and "ERROR" not in log, log
    assert (site / "reference" / "settings.html").exists()


def test_the_built_site_loads_nothing_from_another_host(build):
    _, site = build
    loads = re.compile(
        r"<(?:script|img|iframe)[^>]*\ssrc=\"https?://"  # a script, image or frame from another host
        r"|<link[^>]*\shref=\"https?://[^\"]*\"[^>]*>"  # a stylesheet, font or preconnect
        r"|@import url\(\"?https?:"
    )
    for page in site.rglob("*.html"):
        found = [m.group(0) for m in loads.finditer(page.read_text())]
        assert not found, f"{page.name} loads {found}"


def test_every_setting_is_on_the_settings_page_with_its_meaning():
    page = hooks.settings_page()
    for setting in SETTINGS:
        assert f"`{setting.variable or setting.key}`" in page, setting.key
        assert hooks.MEANINGS.get(setting.key), f"{setting.key} has no meaning in docs/hooks.py MEANINGS"


def test_the_settings_meanings_name_no_setting_that_does_not_exist():
    assert set(hooks.MEANINGS) <= {s.key for s in SETTINGS}


def test_every_other_variable_the_docs_may_name_is_read_somewhere():
    sources = [
        path
        for folder in ("app", "scripts", "tests", "bench")
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and path.suffix in (".py", "") and path != Path(__file__)
    ]
    code = "\n".join(path.read_text() for path in sources)
    assert [name for name in OTHER_VARIABLES if name not in code] == []


def _setting_names() -> set[str]:
    names = {OTHER for OTHER in OTHER_VARIABLES}
    for setting in SETTINGS:
        for name in {setting.key, setting.variable or setting.key}:
            names |= {name, f"FLASK_{name}", f"COUNTERSIGN_{name}"}
    return names


def _named_variables(text: str) -> set[str]:
    """SCREAMING_SNAKE names in code spans and shell blocks: the way the docs name a variable."""
    spans = re.findall(r"`([^`\n]+)`", text) + re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    return {name for span in spans for name in re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b", span)}


def test_the_docs_name_no_setting_that_does_not_exist():
    known = _setting_names()
    unknown = {page: sorted(_named_variables(text) - known) for page, text in page_texts().items()}
    assert not {page: names for page, names in unknown.items() if names}


def test_the_cli_page_holds_every_commands_own_help():
    page = hooks.cli_page()
    group = hooks.cli_group()
    for name in group.commands:
        for line, help_text in hooks._helps(group.commands[name], [name]):
            assert f"## `{line}`" in page and help_text.rstrip() in page, line


def test_the_api_page_holds_every_operation_of_the_openapi_document():
    page = hooks.api_page()
    for path, operations in document()["paths"].items():
        for method in operations:
            assert f"### `{method.upper()} {path}`" in page


def _test_sources() -> str:
    return "\n".join(path.read_text() for path in (ROOT / "tests").rglob("*.py"))


def test_every_test_the_docs_name_exists():
    sources = _test_sources()
    files = {path.name for path in (ROOT / "tests").rglob("test_*.py")}
    missing = []
    for page, text in page_texts().items():
        for name in set(re.findall(r"(?<![\w.])test_\w+(?:\.py)?", text)):
            if name.endswith(".py"):
                found = name in files
            else:
                found = re.search(rf"^\s*(?:def {name}\(|{name} = )", sources, flags=re.M) is not None
            if not found:
                missing.append(f"{page}: {name}")
    assert not missing


def test_no_doc_refers_to_the_design_file_or_a_file_not_in_the_repository():
    wrong = []
    for page, text in page_texts().items():
        if re.search(r"\bDESIGN\b|DESIGN\.md|/work/", text):
            wrong.append(f"{page}: names the design file or a path outside the repository")
        for path in re.findall(r"`((?:app|tests|docs|scripts|bench|static|templates|migrations|\.ci)/[^`\s]*)`", text):
            path = path.split("::")[0]
            if not re.search(r"[…<*{]", path) and not (ROOT / path).exists():
                wrong.append(f"{page}: {path}")
        if not page.startswith("docs/"):  # links between docs pages are mkdocs --strict's to check
            base = (ROOT / page).parent
            for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text):
                if not re.match(r"https?:|mailto:", target) and not (base / target).exists():
                    wrong.append(f"{page}: link to {target}")
    assert not wrong


def test_the_readme_fits_on_a_few_screens_and_starts_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    first_block = re.search(r"```sh\n(.*?)```", readme, flags=re.S)
    assert first_block is not None
    assert [line.split()[0] for line in first_block.group(1).splitlines()] == ["./scripts/demo", "./scripts/test"]


def shell_commands() -> list[tuple[str, str]]:
    """(page, command line) for every line of every ```sh block, continuation lines joined."""
    found = []
    for page, text in page_texts().items():
        for block in re.findall(r"^\s*```sh\n(.*?)^\s*```", text, flags=re.S | re.M):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                if line.strip() and not line.strip().startswith("#"):
                    found.append((page, line.strip()))
    return found


def test_every_code_block_a_reader_would_copy_is_marked_sh():
    for page, text in page_texts().items():
        assert not re.findall(r"```(?:bash|shell|console|zsh)\b", text), page


def _flaskenv_names_the_app() -> bool:
    """A .flaskenv that sets FLASK_APP lets a reader type `flask <command>` without `--app wsgi`."""
    flaskenv = ROOT / ".flaskenv"
    return flaskenv.exists() and "FLASK_APP" in flaskenv.read_text()


def _check_flask(args: list[str]) -> str | None:
    """A `flask --app wsgi …` line: the command exists, its --help works and the line's own
    arguments and options parse (nothing runs)."""
    if args[:2] == ["--app", "wsgi"]:
        args = args[2:]
    elif not _flaskenv_names_the_app():
        return "run flask as `flask --app wsgi …` (no .flaskenv names the app)"
    if args[0] == "run":
        return None  # NOT_RUN["flask run"]
    bare = hooks.cli_app()
    command: click.Command = bare.cli
    path = []
    while isinstance(command, click.Group) and args and not args[0].startswith("-"):
        sub = command.get_command(click.Context(command), args[0])
        if sub is None:
            break
        command, path, args = sub, [*path, args[0]], args[1:]
    if not path or (isinstance(command, click.Group) and args and not args[0].startswith("-")):
        return f"no command {' '.join([*path, args[0]])!r}"
    helped = bare.test_cli_runner().invoke(args=[*path, "--help"])
    if helped.exit_code != 0:
        return f"`{' '.join(path)} --help` failed: {helped.output}"
    try:
        command.make_context(" ".join(path), list(args), resilient_parsing=False)
    except click.ClickException as error:
        return f"`{' '.join(path)}` does not take {args}: {error.format_message()}"
    return None


def _check_server(args: list[str]) -> str | None:
    """gunicorn or uvicorn: its app target (module:attribute) is a module of this repo defining it."""
    targets = [a for a in args if re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", a)]
    if len(targets) != 1:
        return "no module:attribute to serve"
    module, attribute = targets[0].split(":")
    source = ROOT / (module.replace(".", "/") + ".py")
    if not source.exists() or not re.search(rf"^{attribute} = ", source.read_text(), flags=re.M):
        return f"{targets[0]} is not defined in the repository"
    return None


@functools.cache
def _check_python(script: str) -> str | None:
    """A script of the repository: it exists and its --help works (once per script)."""
    if not (ROOT / script).exists():
        return f"no file {script}"
    helped = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    return None if helped.returncode == 0 else f"{script} --help failed: {helped.stderr[-500:]}"


def check_command(line: str) -> str | None:
    """None when the line is checked and sound, else what is wrong with it."""
    words = shlex.split(line, comments=True)
    if words and words[0] == "export":
        words = words[1:]
    while words and re.fullmatch(r"[A-Z][A-Z0-9_]*=.*", words[0]):
        name = words.pop(0).split("=")[0]
        if name not in _setting_names():
            return f"{name} is not a setting"
    if not words:
        return None
    program, args = words[0], words[1:]
    name = program.removeprefix(".venv/bin/")
    if program.startswith("./scripts/"):
        if not os.access(ROOT / program, os.X_OK):
            return f"{program} is not an executable script"
        return None if program in NOT_RUN else f"{program} is neither run nor in NOT_RUN"
    if name == "flask":
        return _check_flask(args)
    if name in ("gunicorn", "uvicorn"):
        return _check_server(args)
    if name == "python":
        return _check_python(args[0])
    if name == "mkdocs":
        return None if f"mkdocs {args[0]}" in NOT_RUN else f"mkdocs {args[0]} is neither run nor in NOT_RUN"
    return None if name in NOT_RUN else f"{name}: add a check, or add it to NOT_RUN with a reason"


def test_every_shell_command_in_the_docs_is_checked():
    problems = [f"{page}: {line}\n  {problem}" for page, line in shell_commands() if (problem := check_command(line))]
    assert len(shell_commands()) >= 20
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "line",
    [
        "flask --app wsgi users create-token alice@example.com --scope root",
        "flask --app wsgi users make-token alice@example.com",
        "./scripts/deploy",
        "NOT_A_SETTING=1 ./scripts/demo",
        "uvicorn app.mcp.nowhere:app",
        "rm -rf instance",
    ],
)
def test_the_shell_check_refuses_a_command_that_would_not_work(line):
    assert check_command(line) is not None


# What each message the tour tells the reader to type shows, in the order the tour goes.
TOUR = {
    "/list_posts": "runs at once",
    "/delete_post post=1": "a card",
    "write a post": "a form",
    "/send_email to=dana@example.org subject=Hello body=Hi": "a card to edit",
    "/manage_files operation=delete_folder path=reports": "a countersignature",
}
ONE_FILE = "/manage_files operation=delete path=reports/old.csv"  # the tour's aside: one file needs one signature


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_tour_tells_the_reader_to_type_the_messages_this_test_runs(page):
    spans = re.findall(r"`([^`\n]+)`", (ROOT / page).read_text())
    messages = [s for s in spans if re.match(r"/[a-z]+_[a-z]+\b", s) or s == "write a post"]
    assert set(messages) <= set(TOUR) | {ONE_FILE}
    assert list(dict.fromkeys(m for m in messages if m in TOUR)) == list(TOUR)


def test_the_tours_messages_show_a_card_a_form_an_edit_and_a_countersignature(copilot):
    alice = copilot.as_person("alice@example.com")
    assert "Spring meetup" in " ".join(alice.chat("/list_posts"))
    alice.chat("/delete_post post=1")
    card = copilot.pending()
    assert card.form is None and card.reason == "Delete this post? This cannot be undone."
    assert card.confirm() == "done"
    alice.chat("write a post")
    form = copilot.pending()
    assert form.form is not None and set(form.form["requestedSchema"]["required"]) == {"title", "body", "status"}
    assert form.submit(title="Tour", body="Words", status="draft") == "done"
    alice.chat("/send_email to=dana@example.org subject=Hello body=Hi")
    fresh = copilot.pending().edit(subject="Hello again")
    assert fresh.rows["Subject"] == "Hello again" and fresh.confirm() == "queued"  # the outbox sends it later
    alice.chat(ONE_FILE)
    assert copilot.pending().confirm() == "done"
    alice.chat("/manage_files operation=delete_folder path=reports")
    folder = copilot.pending()
    assert folder.confirm() == "countersigning"
    assert copilot.as_person("admin@example.com") and folder.countersign() == "done"
