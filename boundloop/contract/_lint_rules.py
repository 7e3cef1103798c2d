"""The patterns behind `boundloop lint`: predicates on `ast` nodes, one or more per rule.

Each rule is a syntactic pattern with guards against false positives; the walk in `_lint.py`
applies them. Identifiers are matched by their words (`max_steps` is `max`, `steps`;
`responseText` is `response`, `text`), never by raw substrings (`return_value` has no `turn`).

BL004 (first block only) to BL007 (one message per result) read the blocks and messages a
function builds; `scope_of` gathers what they need to know about the function around a node
(the tool_result dicts and lists it holds, the flags the model sets...).
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
_SEARCH_CALLS = frozenset({"find", "rfind", "index", "rindex", "count"})
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


# -- small helpers ------------------------------------------------------------------------------


def words(identifier: str) -> list[str]:
    """The lower-case words of an identifier: `maxSteps` and `MAX_STEPS` are `max`, `steps`."""
    return [w for w in _CAMEL.sub("_", identifier).lower().split("_") if w]


def _has_stem(identifier: str, stems: tuple[str, ...]) -> bool:
    return any(word.startswith(stems) for word in words(identifier))


def name_of(node: ast.AST) -> str | None:
    """`x` for `x` and for `a.b.x`; None for anything else."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def callee(node: ast.Call) -> str:
    return name_of(node.func) or ""


def str_const(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def own_nodes(roots: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Every node under `roots` (themselves included) that is not inside a nested def or class."""
    stack = list(roots)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, _SCOPES))


def identifiers(roots: Iterable[ast.AST]) -> list[str]:
    return [name for node in own_nodes(roots) if (name := name_of(node)) is not None]


def is_model_call(node: ast.AST) -> bool:
    """`*.create(...)`, `*.stream(...)`, or a call named after a model (`call_model`, `ask_claude`).

    Pydantic's `model_dump()`, `model_validate()`... are not model calls.
    """
    name = callee(node) if isinstance(node, ast.Call) else ""
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
        return str_const(node.slice) or _subject(node.value)
    return name_of(node)


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
    return bool(str_const(node))


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
    if func.attr in ("startswith", "endswith") or func.attr in _SEARCH_CALLS:
        return _literal(node.args[0]) and _text_like(func.value, user_input)
    if func.attr in _REGEX_CALLS:
        if isinstance(func.value, ast.Name) and func.value.id == "re":
            return len(node.args) >= 2 and _text_like(node.args[1], user_input)
        return _text_like(node.args[0], user_input)
    return False


def text_check(test: ast.expr, user_input: frozenset[str]) -> ast.expr | None:
    """The first part of `test` that tests the model's text against a literal, if any.

    A comparison of a search (`text.find("done") != -1`) is returned whole.
    """
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and (
            _compare_on_text(node, user_input)
            or any(
                isinstance(side, ast.Call) and _call_on_text(side, user_input)
                for side in (node.left, *node.comparators)
            )
        ):
            return node
        if isinstance(node, ast.Call) and _call_on_text(node, user_input):
            return node
    return None


def _text_pattern(pattern: ast.pattern) -> bool:
    """`case "DONE":`, or `case "DONE" | "FINISHED":`."""
    if isinstance(pattern, ast.MatchOr):
        return any(_text_pattern(p) for p in pattern.patterns)
    return isinstance(pattern, ast.MatchValue) and bool(str_const(pattern.value))


def text_cases(node: ast.Match, user_input: frozenset[str]) -> Iterator[ast.match_case]:
    """The cases of `match text:` that match a string literal and leave the loop."""
    if _text_like(node.subject, user_input):
        yield from (case for case in node.cases if _text_pattern(case.pattern) and leaves(case.body))


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


def is_limit(test: ast.expr) -> bool:
    """A test that reads as a limit: an ordering comparison, or a step/turn/budget/time... name."""
    if any(isinstance(op, _ORDERING) for n in ast.walk(test) if isinstance(n, ast.Compare) for op in n.ops):
        return True
    return any(_has_stem(name, _BOUND_STEMS) for name in identifiers([test]))


def is_bounded(loop: ast.While) -> bool:
    """A visible bound in the loop: an exiting `if` on a limit, or a budget/deadline call."""
    if any(is_limit(test) for test in _exit_tests(loop.body)):
        return True
    calls = [node.func for node in own_nodes(loop.body) if isinstance(node, ast.Call)]
    return any(_has_stem(name, _BOUND_CALL_STEMS) for name in identifiers(calls))


def reads_stop_reason(node: ast.AST) -> bool:
    """`x.stop_reason`, `x["stop_reason"]` or a `stop_reason` name somewhere under `node`."""
    return any(
        name_of(n) == "stop_reason" or (isinstance(n, ast.Subscript) and str_const(n.slice) == "stop_reason")
        for n in ast.walk(node)
    )


def decided_by_model(test: ast.expr, flags: frozenset[str]) -> bool:
    """A loop condition only the model ends: on `stop_reason`, or on a flag set from it (or its text).

    A condition that also reads as a limit (`step < max_steps and ...`) is bounded.
    """
    if is_limit(test):
        return False
    return reads_stop_reason(test) or any(isinstance(n, ast.Name) and n.id in flags for n in ast.walk(test))


def is_timeout(node: ast.expr) -> bool:
    """A cancel scope with a deadline: `anyio.fail_after(...)`, `asyncio.timeout(...)`..."""
    name = callee(node) if isinstance(node, ast.Call) else ""
    return name in _TIMEOUTS or "timeout" in words(name)


# -- BL003: swallowed tool error ----------------------------------------------------------------


def catches_all(node: ast.expr | None) -> bool:
    """A bare `except:`, `except Exception`, `except BaseException`, or a tuple with one of them."""
    if isinstance(node, ast.Tuple):
        return any(catches_all(elt) for elt in node.elts)
    return node is None or name_of(node) in _CATCH_ALL


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


def runs_a_tool(body: list[ast.stmt], function: str) -> bool:
    """A try body that calls something, in code about tools (its names or the function's name)."""
    if not any(isinstance(node, ast.Call) for node in own_nodes(body)):
        return False
    names = [function, *identifiers(body)]
    return any(_has_stem(name, _TOOL_STEMS) for name in names)


# The facts of a scope, and the message shapes (BL004 to BL007).

_ITERATION_WRAPPERS = frozenset({"enumerate", "reversed", "list", "tuple", "iter", "sorted"})
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True, slots=True)
class Scope:
    """What a rule needs to know about the function (or module) around a node."""

    name: str
    tool_aware: bool
    """It mentions `"tool_use"`, `stop_reason` or `ToolUseBlock`."""
    last_block_as_call: bool
    """It mentions the string `"tool_use"` and not `"max_tokens"` (where the last block is checked
    for a truncated call): a `.content[-1]` there is taken as the tool call."""
    iterates_content: bool
    """It loops over every block of a response somewhere (`for b in r.content`, a comprehension)."""
    user_input: frozenset[str]
    result_dicts: frozenset[str]
    """Names assigned a tool_result dict literal."""
    result_lists: frozenset[str]
    """Names of lists that hold tool_result dicts."""
    model_flags: frozenset[str]
    """Names set from `stop_reason` or a test on the model's text, and never from a limit."""


# -- tool_result dicts and the lists that hold them ---------------------------------------------


def dict_items(node: ast.Dict) -> dict[str, ast.expr]:
    """The entries of a dict literal whose key is a string constant."""
    return {
        key: value
        for k, value in zip(node.keys, node.values, strict=True)
        if (key := str_const(k)) is not None
    }


def _entries(node: ast.AST) -> dict[str, ast.expr] | None:
    """The string-keyed entries of a dict literal or of a `dict(key=...)` call; None for anything else."""
    if isinstance(node, ast.Dict):
        return dict_items(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return {kw.arg: kw.value for kw in node.keywords if kw.arg is not None}
    return None


def is_tool_result(node: ast.AST) -> bool:
    """A dict literal with `"type": "tool_result"`."""
    return isinstance(node, ast.Dict) and str_const(dict_items(node).get("type")) == "tool_result"


def _holds_tool_result(
    node: ast.AST | None, lists: frozenset[str] = frozenset(), dicts: frozenset[str] = frozenset()
) -> bool:
    """A list literal (or comprehension, or known list) that holds tool_result dicts (or known ones)."""
    if isinstance(node, ast.List | ast.Tuple):
        return any(
            _holds_tool_result(elt, lists, dicts)
            if isinstance(elt, ast.Starred)
            else is_tool_result(elt) or (isinstance(elt, ast.Name) and elt.id in dicts)
            for elt in node.elts
        )
    if isinstance(node, ast.ListComp):
        return is_tool_result(node.elt)
    if isinstance(node, ast.Starred):
        return _holds_tool_result(node.value, lists, dicts)
    return isinstance(node, ast.Name) and node.id in lists


def _assigned_names(node: ast.AST) -> Iterator[tuple[str, ast.expr]]:
    if isinstance(node, ast.Assign):
        yield from ((t.id, node.value) for t in node.targets if isinstance(t, ast.Name))
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        yield node.target.id, node.value


def _result_list(node: ast.AST, dicts: frozenset[str]) -> str | None:
    """`x` for `x.append({tool_result})` or `x.extend([{tool_result}])` (or a known tool_result)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        receiver, arg = node.func.value, node.args[0]
        single = is_tool_result(arg) or (isinstance(arg, ast.Name) and arg.id in dicts)
        if isinstance(receiver, ast.Name) and (
            (node.func.attr == "append" and single)
            or (node.func.attr == "extend" and _holds_tool_result(arg, dicts=dicts))
        ):
            return receiver.id
    return None


# -- scopes -------------------------------------------------------------------------------------


def _mentions(nodes: list[ast.AST], strings: tuple[str, ...], names: tuple[str, ...]) -> bool:
    return any(str_const(node) in strings or name_of(node) in names for node in nodes)


def _over_content(node: ast.AST) -> bool:
    """`x.content`, `x["content"]`, or either under `enumerate(...)`, `reversed(...)`..."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
        return node.func.id in _ITERATION_WRAPPERS and _over_content(node.args[0])
    return is_content(node)


def _iterates_content(nodes: list[ast.AST]) -> bool:
    """A `for` or a comprehension over `x.content`; `next(b for b in x.content ...)` takes one block only."""
    taken_one = {id(node.args[0]) for node in nodes if isinstance(node, ast.Call) and _is_next(node)}
    for node in nodes:
        if isinstance(node, ast.For | ast.AsyncFor) and _over_content(node.iter):
            return True
        if isinstance(node, _COMPREHENSIONS) and id(node) not in taken_one:
            if any(_over_content(generator.iter) for generator in node.generators):
                return True
    return False


def _model_flags(nodes: list[ast.AST], user_input: frozenset[str]) -> frozenset[str]:
    """Names assigned from `stop_reason` or a text test (or under an `if` on one), never from a limit."""
    decided: set[str] = set()
    limited: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.If):
            assigned = [name for stmt in [*node.body, *node.orelse] for name, _ in _assigned_names(stmt)]
            tests: Iterable[tuple[str, ast.expr]] = ((name, node.test) for name in assigned)
        else:
            tests = _assigned_names(node)
        for name, value in tests:
            if is_limit(value):
                limited.add(name)
            elif reads_stop_reason(value) or text_check(value, user_input) is not None:
                decided.add(name)
    return frozenset(decided - limited)


def scope_of(node: ast.Module | ast.FunctionDef | ast.AsyncFunctionDef) -> Scope:
    """The facts the rules read about a function or module, from its own code (nested defs apart)."""
    nodes = list(own_nodes(ast.iter_child_nodes(node)))
    user_input: set[str] = set()
    dicts: set[str] = set()
    for child in nodes:
        for target, value in _assigned_names(child):
            if any(isinstance(n, ast.Call) and callee(n) in ("input", "readline") for n in ast.walk(value)):
                user_input.add(target)
            if is_tool_result(value):
                dicts.add(target)
    lists: set[str] = set()
    for child in nodes:
        lists.update(target for target, value in _assigned_names(child) if _holds_tool_result(value))
        if (name := _result_list(child, frozenset(dicts))) is not None:
            lists.add(name)
    return Scope(
        name="" if isinstance(node, ast.Module) else node.name,
        tool_aware=_mentions(nodes, ("tool_use", "stop_reason"), ("stop_reason", "ToolUseBlock")),
        last_block_as_call=_mentions(nodes, ("tool_use",), ()) and not _mentions(nodes, ("max_tokens",), ()),
        iterates_content=_iterates_content(nodes),
        user_input=frozenset(user_input),
        result_dicts=frozenset(dicts),
        result_lists=frozenset(lists),
        model_flags=_model_flags(nodes, frozenset(user_input)),
    )


# -- BL004: first block only --------------------------------------------------------------------


def is_content(node: ast.AST) -> bool:
    """`x.content` or `x["content"]`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "content"
    return isinstance(node, ast.Subscript) and str_const(node.slice) == "content"


def _int(node: ast.expr) -> int | None:
    """The value of an int constant, `-1` included."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _int(node.operand)
        return None if value is None else -value
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def block_index(node: ast.Subscript) -> int | None:
    """0 for `x.content[0]` (or `x["content"][0]`), -1 for `x.content[-1]`; None for anything else."""
    index = _int(node.slice)
    return index if index in (0, -1) and is_content(node.value) else None


def _is_next(node: ast.Call) -> bool:
    """`next(<generator expression>, ...)`."""
    return (
        isinstance(node.func, ast.Name)
        and node.func.id == "next"
        and bool(node.args)
        and (isinstance(node.args[0], ast.GeneratorExp))
    )


def first_tool_call(node: ast.Call) -> bool:
    """`next(b for b in x.content if b.type == "tool_use")`: only the first tool_use block is handled."""
    generator = node.args[0] if _is_next(node) else None
    if not isinstance(generator, ast.GeneratorExp):
        return False
    over = generator.generators[0]
    tests = [n for test in over.ifs for n in ast.walk(test)]
    return _over_content(over.iter) and _mentions(tests, ("tool_use",), ("ToolUseBlock",))


# -- BL005 to BL007: message shapes -------------------------------------------------------------


def _message(node: ast.AST, role: str) -> dict[str, ast.expr] | None:
    """The entries of a `{"role": role, ...}` dict literal or `dict(role=role, ...)`; None otherwise."""
    items = _entries(node)
    return items if items is not None and str_const(items.get("role")) == role else None


def result_without_id(node: ast.AST) -> bool:
    """A tool_result dict literal, `dict(...)` or `ToolResultBlockParam(...)` with no tool_use_id.

    One with `**` unpacking is left alone: the unpacked mapping may carry the id.
    """
    if isinstance(node, ast.Dict):
        return is_tool_result(node) and None not in node.keys and "tool_use_id" not in dict_items(node)
    if not isinstance(node, ast.Call) or not (
        callee(node) == "dict" or callee(node).endswith("ToolResultBlockParam")
    ):
        return False
    keywords = {kw.arg: kw.value for kw in node.keywords}
    return (
        str_const(keywords.get("type")) == "tool_result"
        and None not in keywords
        and "tool_use_id" not in keywords
    )


def assistant_results(node: ast.AST, scope: Scope) -> ast.expr | None:
    """The role of an assistant message whose content holds tool_result dicts."""
    items = _message(node, "assistant")
    if items is not None and _holds_tool_result(items.get("content"), scope.result_lists, scope.result_dicts):
        return items["role"]
    return None


def _result_message(node: ast.AST, loop: ast.For | ast.AsyncFor, dicts: frozenset[str]) -> bool:
    """A user message whose content is a list of tool_results, or a name assigned one in `loop`."""
    if isinstance(node, ast.Name):
        values = [
            value for n in own_nodes(loop.body) for name, value in _assigned_names(n) if name == node.id
        ]
        return any(
            not isinstance(value, ast.Name) and _result_message(value, loop, dicts) for value in values
        )
    user = _message(node, "user")
    content = user.get("content") if user is not None else None
    return isinstance(content, ast.List) and _holds_tool_result(content, dicts=dicts)


def per_result_message(node: ast.Call, loop: ast.AST | None, scope: Scope) -> ast.expr | None:
    """The message of `x.append({"role": "user", "content": [{tool_result}]})` in a `for` over blocks."""
    if callee(node) != "append" or len(node.args) != 1 or not isinstance(loop, ast.For | ast.AsyncFor):
        return None
    if isinstance(loop.iter, ast.Call) and callee(loop.iter) == "range":
        return None  # a loop over turns, not over the blocks of one response
    return node.args[0] if _result_message(node.args[0], loop, scope.result_dicts) else None
