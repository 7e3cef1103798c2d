"""The patterns behind `boundloop lint`: predicates on `ast` nodes, one or more per rule.

Each rule is a syntactic pattern with guards against false positives; the walk in `_lint.py`
applies them. Identifiers are matched by their words (`max_steps` is `max`, `steps`;
`responseText` is `response`, `text`), never by raw substrings (`return_value` has no `turn`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

# BL001: the last word of a name that holds the model's prose.
_TEXT_WORDS = frozenset("text reply answer completion content response resp message msg".split())
_STR_NORMALIZERS = frozenset({"lower", "upper", "casefold", "strip", "lstrip", "rstrip"})
_REGEX_CALLS = frozenset({"search", "match", "fullmatch", "findall"})
# BL002: a model call, and the words of a visible bound.
_MODEL_CALLS = frozenset({"create", "stream", "chat", "completion"})
_MODEL_WORDS = frozenset({"model", "llm", "claude", "completion"})
_BOUND_STEMS = ("step", "turn", "iter", "count", "attempt", "budget", "max", "limit", "deadline", "time")
_BOUND_CALL_STEMS = ("budget", "deadline")
_TIMEOUTS = frozenset({"fail_after", "move_on_after", "fail_at", "move_on_at"})
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
# BL003: code that runs a tool, and what a handler may catch without re-raising.
_TOOL_STEMS = ("tool", "handler", "dispatch")
_CATCH_ALL = frozenset({"Exception", "BaseException"})


@dataclass(frozen=True, slots=True)
class Scope:
    """What a rule needs to know about the function (or module) around a node."""

    name: str
    tool_aware: bool
    user_input: frozenset[str]
    result_lists: frozenset[str]


# -- small helpers ------------------------------------------------------------------------------


def words(identifier: str) -> list[str]:
    """The lower-case words of an identifier: `maxSteps` and `MAX_STEPS` are `max`, `steps`."""
    return [w for w in _CAMEL.sub("_", identifier).lower().split("_") if w]


def _has_stem(identifier: str, stems: tuple[str, ...]) -> bool:
    return any(word.startswith(stems) for word in words(identifier))


def _name(node: ast.AST) -> str | None:
    """`x` for `x` and for `a.b.x`; None for anything else."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _callee(node: ast.Call) -> str:
    return _name(node.func) or ""


def _str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def own_nodes(roots: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Every node under `roots` (themselves included) that is not inside a nested def or class."""
    stack = list(roots)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, _SCOPES))


def _identifiers(roots: Iterable[ast.AST]) -> list[str]:
    return [name for node in own_nodes(roots) if (name := _name(node)) is not None]


def dict_items(node: ast.Dict) -> dict[str, ast.expr]:
    """The entries of a dict literal whose key is a string constant."""
    return {
        key: value for k, value in zip(node.keys, node.values, strict=True) if (key := _str(k)) is not None
    }


def is_tool_result(node: ast.AST) -> bool:
    """A dict literal with `"type": "tool_result"`."""
    return isinstance(node, ast.Dict) and _str(dict_items(node).get("type")) == "tool_result"


def _holds_tool_result(node: ast.AST | None, lists: frozenset[str] = frozenset()) -> bool:
    """A list literal (or comprehension, or known list) that holds tool_result dicts."""
    if isinstance(node, ast.List | ast.Tuple):
        return any(
            _holds_tool_result(elt, lists) if isinstance(elt, ast.Starred) else is_tool_result(elt)
            for elt in node.elts
        )
    if isinstance(node, ast.ListComp):
        return is_tool_result(node.elt)
    if isinstance(node, ast.Starred):
        return _holds_tool_result(node.value, lists)
    return isinstance(node, ast.Name) and node.id in lists


def is_model_call(node: ast.AST) -> bool:
    """`*.create(...)`, `*.stream(...)`, or a call named after a model (`call_model`, `ask_claude`).

    Pydantic's `model_dump()`, `model_validate()`... are not model calls.
    """
    name = _callee(node) if isinstance(node, ast.Call) else ""
    parts = words(name)
    return name in _MODEL_CALLS or (parts[:1] != ["model"] and not _MODEL_WORDS.isdisjoint(parts))


def _child_bodies(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    if isinstance(stmt, ast.If | ast.For | ast.AsyncFor | ast.While):
        yield from (stmt.body, stmt.orelse)
    elif isinstance(stmt, ast.With | ast.AsyncWith):
        yield stmt.body
    elif isinstance(stmt, ast.Try | ast.TryStar):
        yield from (stmt.body, stmt.orelse, stmt.finalbody, *(handler.body for handler in stmt.handlers))
    elif isinstance(stmt, ast.Match):
        yield from (case.body for case in stmt.cases)


def leaves(stmts: Iterable[ast.stmt], *, raise_too: bool = False, inner_loop: bool = False) -> bool:
    """Whether `stmts` can leave the enclosing loop: `return`, `break` (not a nested loop's), `raise`."""
    for stmt in stmts:
        if isinstance(stmt, ast.Return) or (isinstance(stmt, ast.Break) and not inner_loop):
            return True
        if raise_too and isinstance(stmt, ast.Raise):
            return True
        if isinstance(stmt, _SCOPES):
            continue
        nested = inner_loop or isinstance(stmt, _LOOPS)
        if any(leaves(body, raise_too=raise_too, inner_loop=nested) for body in _child_bodies(stmt)):
            return True
    return False


# -- BL001: control by text ---------------------------------------------------------------------


def _unwrapped(node: ast.AST) -> ast.AST | None:
    """The value under `.strip().lower()` and `str(...)`; None under any other call."""
    while isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute) and node.func.attr in _STR_NORMALIZERS:
            node = node.func.value
        elif isinstance(node.func, ast.Name) and node.func.id == "str" and len(node.args) == 1:
            node = node.args[0]
        else:
            return None
    return node


def _subject(node: ast.AST) -> str | None:
    """The name text is read from: `text` for `text.strip()`, `content` for `r.content[0]`."""
    if isinstance(node, ast.Subscript):
        return _str(node.slice) or _subject(node.value)
    return _name(node)


def _text_like(node: ast.AST, user_input: frozenset[str]) -> bool:
    """Names the model's text (`text`, `reply`, `x.content`...), and was not read from `input()`."""
    value = _unwrapped(node)
    if value is None or (isinstance(value, ast.Name) and value.id in user_input):
        return False
    subject = _subject(value)
    parts = words(subject) if subject is not None else []
    return bool(parts) and parts[-1] in _TEXT_WORDS


def _literal(node: ast.AST) -> bool:
    """A non-empty string constant, or a tuple of them (as `endswith` takes)."""
    if isinstance(node, ast.Tuple):
        return bool(node.elts) and all(_literal(elt) for elt in node.elts)
    return bool(_str(node))


def _compare_on_text(node: ast.Compare, user_input: frozenset[str]) -> bool:
    operands = [node.left, *node.comparators]
    for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
        if isinstance(op, ast.In | ast.NotIn) and _literal(left) and _text_like(right, user_input):
            return True
        if isinstance(op, ast.Eq | ast.NotEq) and (
            (_literal(left) and _text_like(right, user_input))
            or (_literal(right) and _text_like(left, user_input))
        ):
            return True
    return False


def _call_on_text(node: ast.Call, user_input: frozenset[str]) -> bool:
    func = node.func
    if not isinstance(func, ast.Attribute) or not node.args:
        return False
    if func.attr in ("startswith", "endswith"):
        return _literal(node.args[0]) and _text_like(func.value, user_input)
    if func.attr in _REGEX_CALLS:
        if isinstance(func.value, ast.Name) and func.value.id == "re":
            return len(node.args) >= 2 and _text_like(node.args[1], user_input)
        return _text_like(node.args[0], user_input)
    return False


def text_check(test: ast.expr, user_input: frozenset[str]) -> ast.expr | None:
    """The first part of `test` that tests the model's text against a literal, if any."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and _compare_on_text(node, user_input):
            return node
        if isinstance(node, ast.Call) and _call_on_text(node, user_input):
            return node
    return None


# -- BL002: unbounded loop ----------------------------------------------------------------------


def is_forever(test: ast.expr) -> bool:
    """`while True:` or `while 1:`."""
    return isinstance(test, ast.Constant) and type(test.value) in (bool, int) and test.value in (True, 1)


def _exit_tests(stmts: Iterable[ast.stmt], inner_loop: bool = False) -> Iterator[ast.expr]:
    """The tests of the `if`s under `stmts` whose branch leaves the loop (`break`, `return`, `raise`)."""
    for stmt in stmts:
        if isinstance(stmt, _SCOPES):
            continue
        if isinstance(stmt, ast.If) and leaves(
            [*stmt.body, *stmt.orelse], raise_too=True, inner_loop=inner_loop
        ):
            yield stmt.test
        nested = inner_loop or isinstance(stmt, _LOOPS)
        for body in _child_bodies(stmt):
            yield from _exit_tests(body, nested)


def _is_bound(test: ast.expr) -> bool:
    """A test that reads as a limit: an ordering comparison, or a step/turn/budget/time... name."""
    if any(isinstance(op, _ORDERING) for n in ast.walk(test) if isinstance(n, ast.Compare) for op in n.ops):
        return True
    return any(_has_stem(name, _BOUND_STEMS) for name in _identifiers([test]))


def is_bounded(loop: ast.While) -> bool:
    """A visible bound in the loop: an exiting `if` on a limit, or a budget/deadline call."""
    if any(_is_bound(test) for test in _exit_tests(loop.body)):
        return True
    calls = [node.func for node in own_nodes(loop.body) if isinstance(node, ast.Call)]
    return any(_has_stem(name, _BOUND_CALL_STEMS) for name in _identifiers(calls))


def is_timeout(node: ast.expr) -> bool:
    """A cancel scope with a deadline: `anyio.fail_after(...)`, `asyncio.timeout(...)`..."""
    name = _callee(node) if isinstance(node, ast.Call) else ""
    return name in _TIMEOUTS or "timeout" in words(name)


# -- BL003: swallowed tool error ----------------------------------------------------------------


def catches_all(node: ast.expr | None) -> bool:
    """A bare `except:`, `except Exception`, `except BaseException`, or a tuple with one of them."""
    if isinstance(node, ast.Tuple):
        return any(catches_all(elt) for elt in node.elts)
    return node is None or _name(node) in _CATCH_ALL


def _empty(node: ast.expr | None) -> bool:
    return node is None or (isinstance(node, ast.Constant) and node.value in (None, "", ...))


def swallows(body: list[ast.stmt]) -> bool:
    """A handler body that only drops the error: `pass`, `continue`, `...`, `return ""`, `x = None`."""
    for stmt in body:
        if isinstance(stmt, ast.Pass | ast.Continue):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Return | ast.Assign | ast.AnnAssign) and _empty(stmt.value):
            continue
        return False
    return True


def runs_a_tool(body: list[ast.stmt], scope: Scope) -> bool:
    """A try body that calls something, in code about tools (its names or the function's name)."""
    if not any(isinstance(node, ast.Call) for node in own_nodes(body)):
        return False
    names = [scope.name, *_identifiers(body)]
    return any(_has_stem(name, _TOOL_STEMS) for name in names)


# -- scopes -------------------------------------------------------------------------------------


def _tool_aware(nodes: list[ast.AST]) -> bool:
    """Mentions `"tool_use"`, `stop_reason` or `ToolUseBlock`: code that handles tool calls."""
    return any(
        _str(node) in ("tool_use", "stop_reason") or _name(node) in ("stop_reason", "ToolUseBlock")
        for node in nodes
    )


def _assigned_names(node: ast.AST) -> Iterator[tuple[str, ast.expr]]:
    if isinstance(node, ast.Assign):
        yield from ((t.id, node.value) for t in node.targets if isinstance(t, ast.Name))
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        yield node.target.id, node.value


def _result_list(node: ast.AST) -> str | None:
    """`x` for `x.append({tool_result})` or `x.extend([{tool_result}])`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        receiver, arg = node.func.value, node.args[0]
        if isinstance(receiver, ast.Name) and (
            (node.func.attr == "append" and is_tool_result(arg))
            or (node.func.attr == "extend" and _holds_tool_result(arg))
        ):
            return receiver.id
    return None


def scope_of(node: ast.Module | ast.FunctionDef | ast.AsyncFunctionDef) -> Scope:
    """The facts the rules read about a function or module, from its own code (nested defs apart)."""
    nodes = list(own_nodes(ast.iter_child_nodes(node)))
    user_input: set[str] = set()
    lists: set[str] = set()
    for child in nodes:
        for target, value in _assigned_names(child):
            if any(isinstance(n, ast.Call) and _callee(n) in ("input", "readline") for n in ast.walk(value)):
                user_input.add(target)
            if _holds_tool_result(value):
                lists.add(target)
        if (name := _result_list(child)) is not None:
            lists.add(name)
    name = "" if isinstance(node, ast.Module) else node.name
    return Scope(name, _tool_aware(nodes), frozenset(user_input), frozenset(lists))


# -- BL004 to BL007: message shapes -------------------------------------------------------------


def first_block(node: ast.Subscript) -> bool:
    """`x.content[0]` or `x["content"][0]`."""
    index, value = node.slice, node.value
    content = (
        _name(value) == "content"
        if isinstance(value, ast.Attribute)
        else (isinstance(value, ast.Subscript) and _str(value.slice) == "content")
    )
    return content and isinstance(index, ast.Constant) and type(index.value) is int and index.value == 0


def _message(node: ast.AST, role: str) -> dict[str, ast.expr] | None:
    """The entries of a `{"role": role, ...}` dict literal; None for any other node."""
    if isinstance(node, ast.Dict) and _str((items := dict_items(node)).get("role")) == role:
        return items
    return None


def result_without_id(node: ast.AST) -> bool:
    """A tool_result dict literal, `dict(...)` or `ToolResultBlockParam(...)` with no tool_use_id.

    One with `**` unpacking is left alone: the unpacked mapping may carry the id.
    """
    if isinstance(node, ast.Dict):
        return is_tool_result(node) and None not in node.keys and "tool_use_id" not in dict_items(node)
    if not isinstance(node, ast.Call) or not (
        _callee(node) == "dict" or _callee(node).endswith("ToolResultBlockParam")
    ):
        return False
    keywords = {kw.arg: kw.value for kw in node.keywords}
    return (
        _str(keywords.get("type")) == "tool_result" and None not in keywords and "tool_use_id" not in keywords
    )


def assistant_results(node: ast.Dict, lists: frozenset[str]) -> ast.expr | None:
    """The role of an assistant message whose content holds tool_result dicts."""
    items = _message(node, "assistant")
    if items is not None and _holds_tool_result(items.get("content"), lists):
        return items["role"]
    return None


def per_result_message(node: ast.Call, loop: ast.AST | None) -> ast.expr | None:
    """The message of `x.append({"role": "user", "content": [{tool_result}]})` in a `for` over blocks."""
    if _callee(node) != "append" or len(node.args) != 1 or not isinstance(loop, ast.For | ast.AsyncFor):
        return None
    if isinstance(loop.iter, ast.Call) and _callee(loop.iter) == "range":
        return None  # a loop over turns, not over the blocks of one response
    user = _message(node.args[0], "user")
    content = user.get("content") if user is not None else None
    return node.args[0] if isinstance(content, ast.List) and _holds_tool_result(content) else None
