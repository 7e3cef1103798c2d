"""HTML of the inspector's pages: every value from a run goes through `e` (escaped), and only
`Html` (built here from escaped parts) is written as markup."""

from __future__ import annotations

import html
import json
import time
from collections.abc import Iterable
from typing import Final

CSS: Final = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:.6em 1.2em;display:flex;gap:1.4em;align-items:center}
header a{color:#cfe0ff;text-decoration:none}header b{margin-right:1em}
main{padding:1em 1.4em;max-width:1300px}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border-bottom:1px solid #e3e6eb;padding:.35em .6em;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}
.status-running{color:#0a6cff}.status-waiting{color:#b35c00;font-weight:600}.status-stopped{color:#555}
.note{background:#fff7e0;border:1px solid #f0d48a;padding:.5em .8em;margin:.6em 0}
.error{background:#ffe9e9;border:1px solid #e8a0a0;padding:.5em .8em;margin:.6em 0}
pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #e3e6eb;
padding:.5em;margin:.2em 0}
.card{background:#fff;border:1px solid #e3e6eb;padding:.6em 1em;margin:.8em 0}
form.inline{display:inline}
.diagram img{max-width:100%;background:#fff}
.msg{margin:.4em 0}.role{font-weight:600}
"""


class Html(str):
    """Markup: text already escaped, written as it is."""

    __slots__ = ()


def e(value: object) -> Html:
    """`value` as text in HTML: `&`, `<`, `>` and both quotes escaped (an `Html` stays as it is)."""
    if isinstance(value, Html):
        return value
    return Html(html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[str]) -> Html:
    """Markup parts one after the other (each an `Html`, or text, which is escaped)."""
    return Html("".join(e(part) for part in parts))


def as_json(value: object) -> str:
    """A JSON value, indented, for a `<pre>` (escape it)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=True)


def age(epoch: float, now: float | None = None) -> str:
    """How long ago `epoch` was: `12s`, `5m`, `3h`, `2d`."""
    seconds = max(0.0, (time.time() if now is None else now) - epoch)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def cost(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def csrf_field(token: str) -> Html:
    return Html(f'<input type="hidden" name="csrf" value="{e(token)}">')


def page(title: str, body: Html, *, read_only: bool = False) -> Html:
    """A whole page: the header's links, then `body`."""
    banner = (
        Html(
            '<div class="note" id="read-only">Read-only: this inspector was started without '
            "<code>--loop</code>, so it cannot resume runs (approve or deny).</div>"
        )
        if read_only
        else Html("")
    )
    return Html(
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{e(title)} · boundloop</title><style>{CSS}</style></head><body>"
        '<header><b>boundloop inspector</b><a href="/">Runs</a><a href="/approvals">Approvals</a>'
        '<a href="/pools">Pools</a></header>'
        f"<main>{banner}{body}</main></body></html>"
    )
