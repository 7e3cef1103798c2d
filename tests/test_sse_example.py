"""examples/fastapi_app.py's watched runs: server-sent events from the store's event log, the
cancel endpoint, and examples/static/watch.html driven in a real headless browser."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import anyio
import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

from boundloop import ScriptedClient, SQLiteStore, StopReason
from boundloop.state import LoopState
from tests.conftest import require_binary
from tests.test_examples import EXAMPLES, load

DOCS = Path(__file__).resolve().parents[1] / "docs"
WAIT_S = 30.0
"""The bound on every wait for the server or the page (a shared CI machine can be slow)."""


def parse_sse(body: str) -> list[dict[str, str]]:
    """The server-sent events of a finished response body: each one's fields (`id`, `event`, `data`)."""
    events: list[dict[str, str]] = []
    for chunk in body.split("\n\n"):
        if chunk.strip():
            fields = dict(line.split(": ", 1) for line in chunk.split("\n"))
            events.append(fields)
    return events


def watched_app(store_path: Path, *, make_client: Any = None) -> FastAPI:
    example = load("fastapi_app")
    app: FastAPI = example.create_app(
        make_client or example.scripted_client, store=SQLiteStore(store_path, log_deltas=True)
    )
    return app


async def test_sse_ids_are_seqs_and_last_event_id_resumes(tmp_path: Path) -> None:
    """GET /runs/{id}/events: `id:` is each event's seq (all of them, deltas included, in
    order), `event:` its kind, `data:` its JSON; the stream ends with the Stop; `Last-Event-ID: n`
    gives the events after n, nothing before, nothing twice."""
    app = watched_app(tmp_path / "runs.db")
    transport = httpx.ASGITransport(app=app)
    with anyio.fail_after(WAIT_S):
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://app") as client,
        ):
            started = await client.post("/runs", json={"order_id": "O-104"})
            assert started.status_code == 200
            task_id = started.json()["task_id"]
            assert started.json()["watch"] == f"/watch?task_id={task_id}"

            whole = await client.get(f"/runs/{task_id}/events")  # the body ends: after the Stop
            assert whole.headers["content-type"].startswith("text/event-stream")
            events = parse_sse(whole.text)
            ids = [int(event["id"]) for event in events]
            assert ids == list(range(len(events)))  # log_deltas=True: every seq, no gap
            datas = [json.loads(event["data"]) for event in events]
            assert [data["seq"] for data in datas] == ids
            assert [data["kind"] for data in datas] == [event["event"] for event in events]
            assert events[0]["event"] == "run_started"
            assert events[-1]["event"] == "stop"
            assert [event["event"] for event in events].count("stop") == 1
            assert datas[-1]["stop_reason"] == "completed"
            text = "".join(data["text"] for data in datas if data["kind"] == "text_delta")
            assert text == (  # the two turns' text, every piece once, in order
                "Reading order O-104 and asking the carrier about it."
                "O-104: delivered damaged; the refund is justified."
            )

            for last in (0, 7, len(events) - 2):
                resumed = await client.get(f"/runs/{task_id}/events", headers={"Last-Event-ID": str(last)})
                assert parse_sse(resumed.text) == events[last + 1 :]

            unknown = await client.post("/runs/no-such-run/cancel")
            assert unknown.status_code == 404


async def test_the_cancel_endpoint_stops_the_run_cancelled(tmp_path: Path) -> None:
    """POST /runs/{id}/cancel stops a run that waits on a hanging carrier: `cancelled` in the
    answer, in the stream's Stop and in the store."""
    store_path = tmp_path / "runs.db"
    app = watched_app(store_path)
    transport = httpx.ASGITransport(app=app)
    with anyio.fail_after(WAIT_S):
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://app") as client,
        ):
            started = await client.post("/runs", json={"order_id": "O-777", "timeout_s": 60})
            task_id = started.json()["task_id"]
            cancelled = await client.post(f"/runs/{task_id}/cancel")
            assert cancelled.json() == {"task_id": task_id, "stop_reason": "cancelled"}
            events = parse_sse((await client.get(f"/runs/{task_id}/events")).text)
            assert json.loads(events[-1]["data"])["stop_reason"] == "cancelled"
            assert (await client.get("/runs")).json()[task_id]["stop_reason"] == "cancelled"
    state = await SQLiteStore(store_path).load(task_id)
    assert state is not None
    assert state.stop_reason is StopReason.CANCELLED


@contextlib.contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """The app under real uvicorn in a thread, on a free port of 127.0.0.1: its base URL.

    The socket listens before the server starts, so a request made at once waits in its backlog.
    """
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(WAIT_S)
        sock.close()
    assert not thread.is_alive(), "uvicorn did not stop"


@contextlib.contextmanager
def headless_chromium(chromium: str, chromedriver: str) -> Iterator[webdriver.Chrome]:
    """Debian's chromium, headless, driven through its chromedriver (no driver download)."""
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=chromedriver))
    try:
        yield driver
    finally:
        driver.quit()


def stored(store_path: Path, task_id: str) -> LoopState:
    state = anyio.run(SQLiteStore(store_path).load, task_id)
    assert state is not None
    return state


HOSTILE = '<img src=x onerror="document.title=1"> Reading order O-777 and asking the carrier about it.'
"""The model's text in the browser test: markup in it must show as text, never run."""


def hostile_client(order_id: str) -> ScriptedClient:
    """The example's script for `order_id`, its first text carrying markup."""
    script: list[dict[str, Any]] = [
        {
            "stop_reason": "tool_use",
            "content": [
                {"type": "text", "text": HOSTILE},
                {"type": "tool_use", "name": "read_order", "input": {"order_id": order_id}},
                {"type": "tool_use", "name": "track_parcel", "input": {"order_id": order_id}},
            ],
        },
        {"stop_reason": "end_turn", "content": [{"type": "text", "text": "never reached"}]},
    ]
    return ScriptedClient(script)


@pytest.mark.integration
def test_the_watch_page_shows_the_text_as_it_streams_and_stop_cancels_the_run(tmp_path: Path) -> None:
    """In headless chromium: /watch starts a run of order O-777 (its carrier hangs), the model's
    text shows while the run goes on, and the Stop button ends the run `cancelled` (the page
    shows it, the store has it)."""
    chromium = require_binary("chromium", "chromium")
    chromedriver = require_binary("chromedriver", "chromium-driver")
    store_path = tmp_path / "runs.db"
    app = watched_app(store_path, make_client=hostile_client)
    with serving(app) as base_url, headless_chromium(chromium, chromedriver) as driver:
        wait = WebDriverWait(driver, WAIT_S)
        driver.get(f"{base_url}/watch")
        order = driver.find_element(By.ID, "order")
        order.clear()
        order.send_keys("O-777")
        driver.find_element(By.ID, "start-button").click()

        # (1) The text appears while the run goes on: it waits on the carrier, not stopped.
        wait.until(expected_conditions.text_to_be_present_in_element((By.ID, "text"), "asking the carrier"))
        assert driver.find_element(By.ID, "text").text == HOSTILE  # shown as text: escaped
        assert driver.find_elements(By.CSS_SELECTOR, "#text img") == []
        assert driver.title == "Watch a run"
        assert driver.find_element(By.ID, "status").text.startswith("running: ")
        task_id = parse_qs(urlparse(driver.current_url).query)["task_id"][0]
        assert stored(store_path, task_id).stop_reason is None

        # (2) Stop ends the run `cancelled`: on the page (the stream's Stop) and in the store.
        driver.find_element(By.ID, "stop").click()
        wait.until(expected_conditions.text_to_be_present_in_element((By.ID, "status"), "stopped: "))
        status = driver.find_element(By.ID, "status").text
        assert re.fullmatch(r"stopped: cancelled( \(.+\))?", status), status  # and the Stop's detail
        assert stored(store_path, task_id).stop_reason is StopReason.CANCELLED
        lines = [item.text for item in driver.find_elements(By.CSS_SELECTOR, "#tools li")]
        assert any(re.fullmatch(r"track_parcel .* -> cancelled: .*", line) for line in lines), lines


def test_the_sse_recipe_quotes_the_example() -> None:
    """The ```py blocks of docs/streaming.md's "Server-sent events" are the example's own code,
    quoted (not ```python: the guide's runnable blocks, which tests/test_stream.py runs)."""
    section = (DOCS / "streaming.md").read_text(encoding="utf-8").split("## Server-sent events", 1)[1]
    section = section.split("\n## ", 1)[0]
    blocks = re.findall(r"```py\n(.*?)```", section, flags=re.DOTALL)
    assert blocks
    example = (EXAMPLES / "fastapi_app.py").read_text(encoding="utf-8")
    for block in blocks:
        assert block in example
