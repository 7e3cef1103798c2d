"""`boundloop diagram`: the state machine as mermaid, dot, svg or png, optionally with a run's path."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import GraphvizMissing
from ..events import Event, read_events
from ..statemachine import diagram
from ._defaults import DIAGRAM_SUFFIXES
from ._errors import EXIT_OK, CommandError


def diagram_command(args: argparse.Namespace) -> int:
    """Draw the state machine to stdout or `--output`, with `--trace`'s path if given.

    Args:
        args: the parsed arguments of `boundloop diagram`.

    Returns:
        0: the diagram was written.

    Raises:
        CommandError: the trace or output file is unusable, `--format` contradicts the output's
            suffix, or graphviz is missing.
    """
    output: Path | None = None if args.output is None else Path(args.output)
    chosen = output_format(args.format, output)
    trace_file: str | None = args.trace
    trace = None if trace_file is None else _read(trace_file)
    if output is not None and output.suffix.lower() == ".md":  # mermaid: `output_format` made sure
        _update_markdown(output, diagram.render_mermaid(trace))
        return EXIT_OK
    if chosen == "png" and output is None:
        raise CommandError("png is binary: pass --output FILE")
    try:
        image = diagram.render(chosen, trace)
    except GraphvizMissing as exc:
        raise CommandError(f"{chosen} needs graphviz: {exc}") from exc
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    if output is None:
        sys.stdout.write(image.decode())
        sys.stdout.flush()
        return EXIT_OK
    try:
        output.write_bytes(image)
    except OSError as exc:
        raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from exc
    return EXIT_OK


def output_format(given: diagram.DiagramFormat | None, output: Path | None) -> diagram.DiagramFormat:
    """The format to draw: `--format`, else the one the output's suffix names, else mermaid.

    Args:
        given: `--format`, if given.
        output: `--output`, if given.

    Returns:
        The format.

    Raises:
        CommandError: `--format` names another format than the output's suffix (`--format dot
            -o x.svg`): the file would hold what its name says it does not.
    """
    implied = None if output is None else DIAGRAM_SUFFIXES.get(output.suffix.lower())
    if given is None:
        return implied or "mermaid"
    if implied is not None and implied != given:
        suffixes = ", ".join(suffix for suffix, format in DIAGRAM_SUFFIXES.items() if format == given)
        raise CommandError(
            f"--format {given} does not match --output {output}, which names {implied}: "
            f"drop --format, or give an output ending in {suffixes}"
        )
    return given


def _read(path: str) -> list[Event]:
    try:
        return read_events(path)
    except OSError as exc:
        raise CommandError(f"cannot read the trace {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise CommandError(str(exc)) from exc


def _update_markdown(path: Path, mermaid: str) -> None:
    try:
        before = path.read_text(encoding="utf-8") if path.exists() else ""
        path.write_text(diagram.replace_mermaid_block(before, mermaid), encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot update {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise CommandError(f"{path}: {exc}") from exc
