"""`boundloop eval --live` with a setup the API refuses (a misspelt model, a refused key): one
line at the first trial, exit 2, no further trial (a real subprocess against an API on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Generator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED_CASE = str(ROOT / "examples" / "evals" / "shipping_lookup_repeated_failure.json")


@contextmanager
def refusing_api(status: int, kind: str) -> Generator[tuple[str, list[str]]]:
    """An API on 127.0.0.1 answering every request with the API's error JSON; yields its URL and
    the models it was asked for."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            asked.append(str(body.get("model")))
            payload = json.dumps({"type": "error", "error": {"type": kind, "message": kind}}).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(
    ("status", "kind", "model", "said"),
    [
        pytest.param(
            404,
            "not_found_error",
            "claude-sonet-4-6",
            "boundloop: error: the live model: model 'claude-sonet-4-6' does not exist; "
            "did you mean claude-sonnet-4-6?",
            id="misspelt-model",
        ),
        pytest.param(
            401,
            "authentication_error",
            "claude-sonnet-4-5",
            "boundloop: error: the live model: the API refused the API key (401): check ANTHROPIC_API_KEY",
            id="refused-key",
        ),
    ],
)
def test_a_setup_error_stops_the_eval_at_the_first_trial(
    status: int, kind: str, model: str, said: str
) -> None:
    """Exit 2 with one line naming the fix; one request made, not one per trial; no FAIL lines."""
    with refusing_api(status, kind) as (url, asked):
        env = {**os.environ, "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-ant-wrong"}
        ran = subprocess.run(
            [
                sys.executable,
                "-m",
                "boundloop",
                "eval",
                SEED_CASE,
                "--live",
                "--model",
                model,
                "--trials",
                "5",
                "--concurrency",
                "1",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=ROOT,
            env=env,
        )
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert ran.stderr.strip().splitlines()[-1] == said
    assert "FAIL" not in ran.stdout
    assert asked == [model]
