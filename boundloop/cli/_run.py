"""`boundloop run SPEC --goal TEXT`: run the user's own loop, found as `module:factory`."""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

from .. import AgentLoop, ConfigurationError
from ._errors import CommandError
from ._runner import RunOptions, execute, run_goal


def run_command(args: argparse.Namespace) -> int:
    """Run the loop SPEC names on `--goal`, with the shared run options.

    Args:
        args: the parsed arguments of `boundloop run`.

    Returns:
        The exit code: 0 when the run completed, 1 otherwise.

    Raises:
        CommandError: SPEC does not lead to an AgentLoop, or the run failed.
    """
    spec: str = args.spec
    app_dir: str = args.app_dir
    goal: str = args.goal
    start = run_goal(goal)
    target = load_target(spec, app_dir)

    async def build() -> AgentLoop:
        return await make_loop(spec, target)

    return execute(RunOptions.from_args(args), build, start)


def load_target(spec: str, app_dir: str) -> object:
    """Import SPEC's module from `app_dir` and return the attribute SPEC names.

    Args:
        spec: `module:attribute`, e.g. `myapp.agents:build_loop`.
        app_dir: the directory put first on `sys.path` to import the module from.

    Returns:
        The attribute: a factory, or an AgentLoop.

    Raises:
        CommandError: SPEC is malformed, the module cannot be imported, or has no such attribute.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise CommandError(f"SPEC must be module:factory, e.g. myapp.agents:build_loop; got {spec!r}")
    path = str(Path(app_dir).resolve())
    if path not in sys.path:
        sys.path.insert(0, path)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, SyntaxError, or whatever the module raises on import
        raise CommandError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from exc
    try:
        target: object = getattr(module, attribute)
    except AttributeError as exc:
        raise CommandError(f"module {module_name!r} has no attribute {attribute!r}") from exc
    return target


async def make_loop(spec: str, target: object) -> AgentLoop[Any]:
    """The AgentLoop `target` is, or the one it returns when called (and awaited, if async).

    Args:
        spec: SPEC as given, for the error messages.
        target: what `load_target` returned.

    Returns:
        The loop to run.

    Raises:
        CommandError: the factory raised, or what SPEC names is not an AgentLoop.
    """
    made: object = target
    if not isinstance(made, AgentLoop) and callable(made):
        try:
            made = made()
            if inspect.isawaitable(made):
                made = await made
        except ConfigurationError as exc:
            raise CommandError(f"{spec}: {exc}") from exc
        except Exception as exc:  # the user's factory: report it, never a traceback
            raise CommandError(f"{spec}: the factory raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(made, AgentLoop):
        raise CommandError(f"{spec} must be an AgentLoop or return one, got {type(made).__name__}")
    return made  # pyright: ignore[reportUnknownVariableType]  # an AgentLoop of any output type
