"""The README's code runs as written, its quick start names the commands CI uses, it names the
trace kinds the code has, and its links work on the package index page as well as on GitHub."""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import pytest

from boundloop.cli import main
from boundloop.events import EVENT_KINDS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")

ASSUMED_REPOSITORY = "https://github.com/boundloop/boundloop"
"""Where the README's links point while pyproject.toml has no `[project.urls]` repository."""


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_python_block_runs(index: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each python block of the README runs to completion as a script; the embedding one answers."""
    source = python_blocks()[index]
    script = tmp_path / f"readme_{index}.py"
    script.write_text(source, encoding="utf-8")
    namespace = runpy.run_path(str(script), run_name="__main__")
    if "load_cases" in source:  # the eval block: its test passes on every shipped case
        cases = namespace["load_cases"](ROOT / "examples" / "evals")
        assert len(cases) >= 13
        for case in cases:
            if case.live:  # the block skips a live case (pytest's own exception)
                with pytest.raises(pytest.skip.Exception, match="boundloop eval --live"):
                    anyio.run(namespace["test_eval"], case)
            else:
                anyio.run(namespace["test_eval"], case)
    elif "resume(" in source:
        assert "completed Refunded O-104." in capsys.readouterr().out
    elif "ModelSettings(" in source:  # the model settings block: the loop sends them
        assert namespace["loop"].config.spec.settings.data()["stop_sequences"] == ["</answer>"]
    elif "loop.run" in source:
        assert "evidence is sufficient" in capsys.readouterr().out
    else:  # the FastAPI block: the app serves /metrics
        routes = namespace["app"].routes
        assert "/metrics" in [getattr(route, "path", None) for route in routes]


def test_quick_start_is_the_demo_and_the_ci_test_command() -> None:
    """The quick start runs `boundloop demo` and `bash scripts/test`, which `.ci/run` calls too."""
    quick_start = README.split("## Quick start", 1)[1].split("##", 1)[0]
    assert "boundloop demo" in quick_start
    assert "bash scripts/test" in quick_start
    assert "bash scripts/test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_command_section_says_what_each_demo_shows(capsys: pytest.CaptureFixture[str]) -> None:
    """ "The command" names the blocked `issue_refund` only with `--scenario policy_blocked`, and
    the demo does as it says: the default run never tries it, that scenario stops on it (the
    section said the default demo showed the attempt blocked, long after it stopped trying)."""
    section = " ".join(README.split("## The command", 1)[1].split("\n## ", 1)[0].split())
    sentences = [
        sentence for sentence in re.split(r"(?<=[.)]) (?=[A-Z`])", section) if "issue_refund" in sentence
    ]
    assert sentences
    assert all("--scenario policy_blocked" in sentence for sentence in sentences), sentences
    assert main(["demo"]) == 0
    assert "issue_refund" not in capsys.readouterr().out
    assert main(["demo", "--scenario", "policy_blocked"]) == 1
    blocked = capsys.readouterr().out
    assert "issue_refund" in blocked
    assert "stopped: policy_blocked" in blocked


def quick_start_commands() -> list[str]:
    """The quick start's shell block, one command a line."""
    quick_start = README.split("## Quick start", 1)[1].split("##", 1)[0]
    block = re.search(r"```sh\n(.*?)```", quick_start, flags=re.DOTALL)
    assert block is not None
    return block.group(1).strip().splitlines()


DEV_ONLY = (
    "pytest",
    "hypothesis",
    "trio",
    "ruff",
    "mypy",
    "pyright",
    "hatchling",
    "uvicorn",
    "starlette",
    "fastapi",
    "opentelemetry.sdk",  # the API comes with anthropic
    "psycopg",
    "psycopg_pool",
    "dbos",
    "blockbuster",
    "selenium",
    "mcp",
    "mcp_server_time",
)
"""Packages only the `dev` extra installs (what the core dependencies pull in is not here)."""


def test_the_first_command_installs_what_the_demo_needs_and_no_more() -> None:
    """The first command installs the package without extras and runs the demo, which runs with
    every dev-only package out of reach; the second installs the `dev` extra and runs the tests."""
    first, second = quick_start_commands()
    assert "pip install -e . " in first
    assert "[" not in first
    assert first.endswith("boundloop demo")
    assert second == ".venv/bin/pip install -e '.[dev]' && bash scripts/test"
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert {re.split(r"[<>=\[ ]", d)[0] for d in core}.isdisjoint(re.split(r"[<>=\[ ]", d)[0] for d in dev)
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in DEV_ONLY)  # importing one fails
    code = (
        f"import sys; {blocked}; from boundloop.cli import main; raise SystemExit(main(['demo', '--json']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert '"stop_reason": "completed"' in done.stdout


def test_the_readme_names_every_tool_the_test_command_runs() -> None:
    """Each step of `scripts/test` (its `== TOOL` banners) is named in the quick start."""
    steps = re.findall(r'echo "== ([^"]+)"', (ROOT / "scripts" / "test").read_text(encoding="utf-8"))
    assert len(steps) == 5
    quick_start = README.split("## Quick start", 1)[1].split("##", 1)[0]
    for step in steps:
        assert f"`{step}`" in quick_start, step


def section(heading: str) -> str:
    """The README's text under `heading` (the whole heading line), up to the next heading."""
    lines = README.splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("#")), len(lines))
    return "\n".join(lines[start:end])


def test_the_readme_names_the_trace_kinds_of_the_code() -> None:
    """The README's list of event kinds is EVENT_KINDS, in order: no kind missing, none invented."""
    listed = re.findall(
        r"^- `([a-z_]+)` — ", section('### The trace<a id="the-trace"></a>'), flags=re.MULTILINE
    )
    assert tuple(listed) == EVENT_KINDS


def repository() -> str:
    """The repository URL: pyproject's `[project.urls]` when it names one, else the assumed one."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    urls: dict[str, str] = pyproject["project"].get("urls", {})
    named = [url for key, url in urls.items() if key.lower() in ("repository", "source", "source code")]
    return (named[0] if named else ASSUMED_REPOSITORY).rstrip("/")


def links(markdown: str) -> list[str]:
    """Every link target of a Markdown text (inline links, images, HTML href and src) outside code."""
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.DOTALL | re.MULTILINE)
    inline = re.findall(r"\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)", prose)
    html = re.findall(r"(?:href|src)=\"([^\"]*)\"", prose)
    return inline + html


def test_every_readme_link_is_absolute_or_an_anchor() -> None:
    """Relative links break on the package index page: every link is http(s) or an in-page anchor."""
    found = links(README)
    assert len(found) >= 15  # the scan finds the links
    relative = [link for link in found if not re.match(r"https?://|#", link)]
    assert relative == []


def test_every_in_page_anchor_has_an_explicit_target() -> None:
    """The package index page makes no ids from headings: each `#anchor` has an `<a id=...>` of its own."""
    targets = set(re.findall(r'<a id="([^"]+)"></a>', README))
    anchors = {link[1:] for link in links(README) if link.startswith("#")}
    assert anchors
    assert anchors <= targets


def test_repository_links_point_at_files_that_exist() -> None:
    """Links into the repository use its URL, on main, and name a file or folder of this checkout."""
    base = repository()
    into_repository = [
        link for link in links(README) if re.match(r"https://github\.com/[^/]+/boundloop\b", link)
    ]
    assert len(into_repository) >= 10
    for link in into_repository:
        match = re.fullmatch(re.escape(base) + r"/(blob|tree)/main/([^#]+)(#[a-z0-9-]+)?", link)
        assert match is not None, f"{link} is not {base}/blob/main/PATH or {base}/tree/main/PATH"
        kind, path = match.group(1), match.group(2)
        target = ROOT / path
        assert target.is_file() if kind == "blob" else target.is_dir(), f"{link}: no {path} in the checkout"
