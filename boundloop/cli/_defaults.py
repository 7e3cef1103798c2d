"""What the parser shows, kept apart from the modules that run the commands so `--help` loads none.

`boundloop --help` (and a usage error) builds the parser and stops: it must not import the loop,
the Anthropic SDK or graphviz's wrapper for a default or a list of choices. The modules that own
these values re-export them (`demo.MODEL`), or are checked against them (`diagram.FORMATS`, in
tests/test_cli.py).
"""

from __future__ import annotations

from typing import Final, Literal

DEMO_MODEL: Final = "claude-sonnet-4-6"
"""The demo's model, `boundloop.cli.demo.MODEL`: what `--live` calls unless `--model` says."""

SIMULATED_MODEL: Final = "sim"
"""`--live --model sim`: the simulated model (`boundloop.testing.SimulatedClient`), offline and
with no key; the loops keep their own model names, so costs are what the same tokens would cost."""

DiagramFormat = Literal["mermaid", "dot", "svg", "png"]
"""`boundloop.statemachine.diagram.DiagramFormat`, for the parser."""

DIAGRAM_FORMATS: Final[tuple[DiagramFormat, ...]] = ("mermaid", "dot", "svg", "png")
"""`boundloop.statemachine.diagram.FORMATS`: the choices of `diagram --format`."""

DIAGRAM_SUFFIXES: Final[dict[str, DiagramFormat]] = {
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
    ".md": "mermaid",
    ".dot": "dot",
    ".gv": "dot",
    ".svg": "svg",
    ".png": "png",
}
"""The format an `--output` suffix names: the default of `--format`, and what it must agree with."""
