"""Generating the state diagram from code.

The diagram is drawn from the same transition table the loop runs (`boundloop.statemachine.table`):
mermaid text always, svg/png when graphviz is installed. Pass a run's trace to highlight the
path it took, with each edge labelled with how often it was taken.

    python examples/diagram.py                  # mermaid, then the path of one scripted run
    python examples/diagram.py out/loop.svg     # also write an svg with that path (needs graphviz)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import anyio

from boundloop import AgentLoop, Budget, GraphvizMissing, Observers, ScriptedClient, tool
from boundloop.statemachine import render_image, render_mermaid, trace_path


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def build_loop() -> AgentLoop:
    """A small loop that looks two keys up and answers: something to draw the path of."""
    return AgentLoop(
        ScriptedClient(
            [
                {
                    "stop_reason": "tool_use",
                    "content": [{"type": "tool_use", "name": "lookup", "input": {"key": "a"}}],
                },
                {
                    "stop_reason": "tool_use",
                    "content": [{"type": "tool_use", "name": "lookup", "input": {"key": "b"}}],
                },
                {"stop_reason": "end_turn", "content": [{"type": "text", "text": "a and b are known."}]},
            ]
        ),
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None),
    )


async def main(output: Path | None) -> int:
    """Print the diagram, then the same diagram with one run's path; write an image if asked."""
    print(render_mermaid())

    result = await build_loop().run("Look up a and b.")
    print(render_mermaid(result.events, title=f"one run: {result.stop_reason}"))
    taken = trace_path(result.events)
    print(f"{sum(taken.counts.values())} transitions taken, ending in {taken.last}")

    if output is not None:
        if output.suffix not in (".svg", ".png"):
            print(f"{output}: the image must be .svg or .png", file=sys.stderr)
            return 2
        fmt: Literal["svg", "png"] = "png" if output.suffix == ".png" else "svg"
        output.parent.mkdir(parents=True, exist_ok=True)
        try:
            # graphviz runs a subprocess and writes a file: off the event loop.
            await anyio.to_thread.run_sync(render_image, fmt, output, result.events)
        except GraphvizMissing as exc:
            print(f"no image: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, Path(sys.argv[1]) if len(sys.argv) > 1 else None))
