"""The patterns behind `boundloop lint`, continued: the facts of a scope, and the message shapes.

BL004 (first block only) to BL007 (one message per result) read the blocks and messages a
function builds; `scope_of` gathers what they need to know about the function around a node
(the tool_result dicts and lists it holds, the flags the model sets...).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ._lint_rules import callee, is_limit, name_of, own_nodes, reads_stop_reason, str_const, text_check

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
