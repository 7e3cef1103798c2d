"""`boundloop lint PATH`: find the anti-patterns of hand-written agent loops, reading the code with `ast`.

Each rule flags a shape of code that makes an agent loop fragile (control by the model's
prose, no bound, dropped tool errors...) and names its one-line fix. A comment
`# boundloop: ignore[BL001]` (or `# boundloop: ignore`) on the flagged line silences it.
"""

from __future__ import annotations

import ast
import errno
import importlib.util
import io
import os
import re
import stat
import tokenize
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final, final

from .._lazy import claim
from . import _lint_rules as rules

__all__ = ["RULES", "Finding", "lint_paths", "lint_source"]

_TABLE: dict[str, tuple[str, str, str]] = {
    "BL000": (
        "syntax-error",
        "the file cannot be read (not a regular file, too large), decoded or parsed: no other rule ran on it",
        "make the file a regular file of at most 2 MiB that parses: boundloop lint reads it with ast.parse",
    ),
    "BL001": (
        "control-by-text",
        "a string test on the model's text (`in`, `==`, find, re.search, match/case) ends or steers the loop",
        "route on response.stop_reason (end_turn, tool_use, ...), never on the model's text",
    ),
    "BL002": (
        "unbounded-loop",
        "a `while True` (or `while` on stop_reason) calling the model, with no step, budget or time bound",
        "bound the loop: for step in range(max_steps): ..., or a budget check that stops it",
    ),
    "BL003": (
        "swallowed-tool-error",
        "a catch-all `except` around a tool call that only passes, continues or returns nothing",
        "turn the error into a tool_result with is_error: true and the error text, or re-raise",
    ),
    "BL004": (
        "first-block-only",
        "`.content[0]`, `[-1]` or `next(...)` takes one block where tool calls come: the others are lost",
        "iterate over every block: [b for b in response.content if b.type == 'tool_use']",
    ),
    "BL005": (
        "tool-result-role",
        "a tool_result block inside an assistant message",
        "tool results go in a user message",
    ),
    "BL006": (
        "tool-result-without-id",
        "a tool_result block without tool_use_id",
        "answer each tool_use with its tool_use_id",
    ),
    "BL007": (
        "one-message-per-result",
        "a user message appended per tool result, inside a loop over the tool_use blocks",
        "answer all tool_use blocks of a response in ONE user message",
    ),
}

RULES: Mapping[str, tuple[str, str]] = MappingProxyType(
    {rule: (name, description) for rule, (name, description, _fix) in _TABLE.items()}
)
"""Rule id -> (name, one-line description), for the docs and `boundloop lint --help`."""

_IGNORE = re.compile(r"#\s*boundloop:\s*ignore\b(?:\[(?P<rules>[^\]]*)\])?")
_SKIPPED_DIRS = frozenset({".venv", "__pycache__"})
MAX_FILE_BYTES: Final = 2 * 1024 * 1024
"""The largest file `lint_paths` reads; a larger one is one BL000 finding, read no further."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One anti-pattern at one place in a file."""

    path: str
    """The file, as it was given or found under a given folder."""
    line: int
    """1-based line."""
    column: int
    """1-based column, in characters."""
    rule: str
    """The stable rule id, e.g. `BL001`; see `RULES`."""
    name: str
    """The rule's short kebab-case name, e.g. `control-by-text`."""
    message: str
    """What is wrong here, on one line."""
    fix: str
    """The rule's one-line fix."""

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}:{self.column}"
        return f"{where}: {self.rule} {self.name}: {self.message} (fix: {self.fix})"


def _snippet(node: ast.AST, width: int = 60) -> str:
    """The node's source on one line, cut at `width` characters."""
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= width else text[: width - 3] + "..."


class _Walk(ast.NodeVisitor):
    """One walk over a module: tracks scopes, the loops of the current function and open timeouts."""

    def __init__(self) -> None:
        self.hits: list[tuple[ast.AST, str, str]] = []
        self.scopes: list[rules.Scope] = []
        self.loops: list[ast.For | ast.AsyncFor | ast.While] = []
        self.timeouts = 0
        self.asserting = False
        self._agent_loops: dict[int, bool] = {}

    def hit(self, node: ast.AST, rule: str, message: str) -> None:
        self.hits.append((node, rule, message))

    def agent_loop(self, loop: ast.AST) -> bool:
        """Whether `loop` calls the model somewhere in its own code; cached per loop."""
        if id(loop) not in self._agent_loops:
            self._agent_loops[id(loop)] = any(rules.is_model_call(n) for n in rules.own_nodes([loop]))
        return self._agent_loops[id(loop)]

    def visit_Module(self, node: ast.Module) -> None:
        self.scopes.append(rules.scope_of(node))
        self.generic_visit(node)

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        saved = self.loops, self.timeouts
        self.loops, self.timeouts = [], 0
        self.scopes.append(rules.scope_of(node))
        self.generic_visit(node)
        self.scopes.pop()
        self.loops, self.timeouts = saved

    visit_FunctionDef = visit_AsyncFunctionDef = _visit_function

    def _visit_loop(self, node: ast.For | ast.AsyncFor | ast.While) -> None:
        self.loops.append(node)
        self.generic_visit(node)
        self.loops.pop()

    visit_For = visit_AsyncFor = _visit_loop

    def _visit_with(self, node: ast.With | ast.AsyncWith) -> None:
        opened = sum(rules.is_timeout(item.context_expr) for item in node.items)
        self.timeouts += opened
        self.generic_visit(node)
        self.timeouts -= opened

    visit_With = visit_AsyncWith = _visit_with

    def visit_While(self, node: ast.While) -> None:
        """BL001 on the condition of an agent loop; BL002 on an unbounded `while True` or `while` that
        only the model ends (on `stop_reason`, or a flag set from it)."""
        if self.agent_loop(self.loops[0] if self.loops else node):
            self._text_control(node.test)
        if not self.timeouts and self.agent_loop(node) and not rules.is_bounded(node):
            if rules.is_forever(node.test):
                self.hit(
                    node,
                    "BL002",
                    "`while True` calls the model with no visible bound on steps, budget or time",
                )
            elif rules.decided_by_model(node.test, self.scopes[-1].model_flags):
                self.hit(
                    node,
                    "BL002",
                    f"`while {_snippet(node.test, 40)}` is bounded only by the model: "
                    "no step, budget or time bound",
                )
        self._visit_loop(node)

    def visit_If(self, node: ast.If) -> None:
        """BL001: an `if` on the model's text whose branch leaves an agent loop."""
        if self.loops and self.agent_loop(self.loops[0]) and rules.leaves([*node.body, *node.orelse]):
            self._text_control(node.test)
        self.generic_visit(node)

    def visit_Match(self, node: ast.Match) -> None:
        """BL001: a `match` on the model's text whose string case leaves an agent loop."""
        if self.loops and self.agent_loop(self.loops[0]):
            for case in rules.text_cases(node, self.scopes[-1].user_input):
                steered = f"match {_snippet(node.subject, 30)}: case {_snippet(case.pattern, 30)}"
                self.hit(case.pattern, "BL001", f"the loop is steered by the model's text: `{steered}`")
        self.generic_visit(node)

    def _text_control(self, test: ast.expr) -> None:
        if (found := rules.text_check(test, self.scopes[-1].user_input)) is not None:
            self.hit(found, "BL001", f"the loop is steered by the model's text: `{_snippet(found)}`")

    def _visit_try(self, node: ast.Try | ast.TryStar) -> None:
        """BL003: a catch-all handler around a tool call that drops the error."""
        if rules.runs_a_tool(node.body, self.scopes[-1].name):
            for handler in node.handlers:
                if rules.catches_all(handler.type) and rules.swallows(handler.body):
                    caught = "except:" if handler.type is None else f"except {_snippet(handler.type)}:"
                    self.hit(handler, "BL003", f"`{caught}` drops the tool's error: the model never sees it")
        self.generic_visit(node)

    visit_Try = visit_TryStar = _visit_try

    def visit_Assert(self, node: ast.Assert) -> None:
        """An assertion checks a shape, it does not handle a response: BL004 leaves it alone."""
        self.asserting = True
        self.generic_visit(node)
        self.asserting = False

    def visit_Subscript(self, node: ast.Subscript) -> None:
        """BL004: `.content[0]` in a function that handles tool calls, `.content[-1]` in one that names
        "tool_use", unless it iterates over `.content` too (or in an `assert`)."""
        index, scope = rules.block_index(node), self.scopes[-1]
        if index is not None and not self.asserting and not scope.iterates_content:
            if scope.tool_aware if index == 0 else scope.last_block_as_call:
                which = "first" if index == 0 else "last"
                self.hit(node, "BL004", f"`{_snippet(node)}` reads only the {which} block of a response")
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        """BL005: a tool_result in an assistant message; BL006: a tool_result without its id."""
        self._message_shape(node)
        self.generic_visit(node)

    def _message_shape(self, node: ast.Dict | ast.Call) -> None:
        if rules.result_without_id(node):
            self.hit(node, "BL006", "a tool_result without tool_use_id: the API cannot pair it with its call")
        if (role := rules.assistant_results(node, self.scopes[-1])) is not None:
            self.hit(
                role, "BL005", "a tool_result in an assistant message: the API takes them in user messages"
            )

    def visit_Call(self, node: ast.Call) -> None:
        """BL004 on `next(<the tool_use blocks>)`; BL005 and BL006 on `dict(...)`; BL007 on a user
        message appended per tool result."""
        if rules.first_tool_call(node) and not self.asserting:
            taken = f"next{_snippet(node.args[0], 56)}" if len(node.args) == 1 else _snippet(node)
            self.hit(node, "BL004", f"`{taken}` handles only the first tool_use block of a response")
        self._message_shape(node)
        loop = self.loops[-1] if self.loops else None
        if (appended := rules.per_result_message(node, loop, self.scopes[-1])) is not None:
            self.hit(
                appended, "BL007", "a user message per tool result, appended inside the loop over the blocks"
            )
        self.generic_visit(node)


def _suppressions(source: str) -> dict[int, frozenset[str]]:
    """Line -> the rule ids its `# boundloop: ignore[...]` comment silences (empty: all of them)."""
    found: dict[int, frozenset[str]] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT and (match := _IGNORE.search(token.string)):
                listed = (match["rules"] or "").split(",")
                found[token.start[0]] = frozenset(r.strip().upper() for r in listed if r.strip())
    except (tokenize.TokenError, SyntaxError):
        pass  # the parse succeeded, so this is an oddity of the tokenizer: keep what was found
    return found


def _finding(path: str, line: int, column: int, rule: str, message: str) -> Finding:
    name, _description, fix = _TABLE[rule]
    return Finding(path=path, line=line, column=column, rule=rule, name=name, message=message, fix=fix)


def _column(lines: list[str], line: int, col_offset: int) -> int:
    """The 1-based character column of `ast`'s 0-based UTF-8 byte offset."""
    if not 0 < line <= len(lines):
        return col_offset + 1
    encoded = lines[line - 1].encode("utf-8", "surrogatepass")
    return len(encoded[:col_offset].decode("utf-8", "ignore")) + 1


def _order(finding: Finding) -> tuple[str, int, int, str]:
    return finding.path, finding.line, finding.column, finding.rule


def lint_source(source: str, path: str = "<string>") -> list[Finding]:
    """Lint Python source text.

    Args:
        source: the code of one module.
        path: the name the findings carry.

    Returns:
        The findings, by line and column. Code that does not parse gives one `BL000` finding
        instead of raising.
    """
    walk = _Walk()
    try:
        with warnings.catch_warnings():  # an invalid escape warns; the code is read, never run
            warnings.simplefilter("ignore")
            tree = ast.parse(source, filename=path)
        walk.visit(tree)
    except SyntaxError as exc:
        return [_finding(path, exc.lineno or 1, exc.offset or 1, "BL000", f"cannot parse: {exc.msg}")]
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes (some versions), deep nesting
        reason = "the code is nested too deeply" if not isinstance(exc, ValueError) else str(exc)
        return [_finding(path, 1, 1, "BL000", f"cannot parse: {reason}")]
    lines = re.split(r"\r\n|\r|\n", source)
    ignored = _suppressions(source)
    findings: list[Finding] = []
    for node, rule, message in walk.hits:
        line = getattr(node, "lineno", 1)
        silenced = ignored.get(line)
        if silenced is not None and (not silenced or rule in silenced):
            continue
        findings.append(
            _finding(path, line, _column(lines, line, getattr(node, "col_offset", 0)), rule, message)
        )
    return sorted(findings, key=_order)


def _python_files(folder: Path) -> Iterator[Path]:
    """The `*.py` files under `folder`, skipping `.venv`, `__pycache__` and hidden folders and files.

    Linked folders are not entered (os.walk's default); a linked file is yielded like any other and
    `_read` decides whether it is read.
    """
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py") and not name.startswith("."):
                yield Path(root, name)


def _read(path: Path, tree: Path | None) -> bytes | str:
    """The file's bytes, or why it is not read: not a regular file (a FIFO would block forever, a
    device never end), larger than `MAX_FILE_BYTES`, or, found under `tree`, a symlink that leads
    out of it. Nothing is opened that is not a regular file, and at most the cap plus one byte is read.
    """
    try:
        if tree is not None and path.is_symlink() and not path.resolve().is_relative_to(tree.resolve()):
            return "not read: a symlink that leads out of the folder (lint its target by name)"
        if not stat.S_ISREG(os.stat(path).st_mode):
            return "not read: not a regular file"
        # O_NONBLOCK: were it swapped for a FIFO since, opening it does not wait for a writer.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        with os.fdopen(descriptor, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                return "not read: not a regular file"
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    if len(data) > MAX_FILE_BYTES:
        return f"not read: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB"
    return data


def _lint_file(path: Path, tree: Path | None) -> list[Finding]:
    data = _read(path, tree)
    if isinstance(data, str):
        return [_finding(str(path), 1, 1, "BL000", data)]
    try:
        source = importlib.util.decode_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        return [_finding(str(path), 1, 1, "BL000", f"cannot decode: {exc}")]
    return lint_source(source, str(path))


def lint_paths(paths: Iterable[str | Path]) -> list[Finding]:
    """Lint files, and the `*.py` files under folders.

    Folders are walked recursively, skipping `.venv`, `__pycache__` and hidden folders; a file
    given by name is linted whatever its name. Only regular files of at most `MAX_FILE_BYTES`
    are read (under a folder, a symlink only when it stays inside it): any other is one BL000
    finding saying why, as is a file that does not decode or parse. Nothing blocks.

    Args:
        paths: files and folders (a single `str` or `Path` is taken as one path).

    Returns:
        Every finding, by path, line and column.

    Raises:
        FileNotFoundError: a path does not exist (raised before any file is read).
    """
    given = [paths] if isinstance(paths, str | Path) else list(paths)
    files: dict[Path, Path | None] = {}  # file -> the folder it was found under (None: named)
    for raw in given:
        path = Path(raw)
        if path.is_dir():
            for file in _python_files(path):
                files.setdefault(file, path)
        elif path.exists():
            files[path] = None
        else:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(raw))
    findings = [finding for file, tree in files.items() for finding in _lint_file(file, tree)]
    return sorted(findings, key=_order)


claim("boundloop.contract", Finding)  # reported at its public home
