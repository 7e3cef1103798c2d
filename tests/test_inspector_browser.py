"""The inspector in headless chromium, served by uvicorn on a loopback port over a SQLite store
with runs in it: the list and its filters, a run's timeline and diagram, approving the waiting
refund (the run resumes to `completed`, the refund runs once), a hostile goal shown as text, a
POST without the CSRF token refused, and the token's 401.

With `BOUNDLOOP_SCREENSHOTS=DIR` the pages are saved there as PNG (scripts/screenshots writes
docs/images/ so)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select
from selenium.webdriver.support.wait import WebDriverWait

from boundloop import SQLiteStore, StopReason
from boundloop.web import app
from tests import inspector_runs
from tests.conftest import require_binary
from tests.inspector_runs import HOSTILE_GOAL, SECRET, build_loop
from tests.test_sse_example import WAIT_S, headless_chromium, serving, stored

pytestmark = pytest.mark.integration

FETCH_STATUS = """
const done = arguments[arguments.length - 1];
fetch(arguments[0], {method: arguments[1], body: arguments[2] ? new URLSearchParams(arguments[2]) : undefined,
                     credentials: "same-origin"})
  .then(answer => done(answer.status), error => done(String(error)));
"""
"""Run in the page: the HTTP status of a request made by the page itself (its cookies included)."""


def shoot(driver: webdriver.Chrome, name: str) -> None:
    """Save the page as `$BOUNDLOOP_SCREENSHOTS/inspector-<name>.png` when that is set."""
    folder = os.environ.get("BOUNDLOOP_SCREENSHOTS")
    if folder:
        driver.set_window_size(1280, 900)
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1280, min(max(int(height) + 40, 600), 2400))
        driver.save_screenshot(str(Path(folder) / f"inspector-{name}.png"))


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    inspector_runs.REFUNDS.clear()
    return inspector_runs.make_store(tmp_path / "runs.db")


@pytest.fixture
def browser() -> tuple[str, str]:
    return require_binary("chromium", "chromium"), require_binary("chromedriver", "chromium-driver")


def task_ids(driver: webdriver.Chrome) -> list[str]:
    return [link.text for link in driver.find_elements(By.CSS_SELECTOR, "#runs a.task")]


def test_the_list_a_run_and_an_approval_in_the_browser(store: SQLiteStore, browser: tuple[str, str]) -> None:
    inspector = app(store, build_loop())
    with serving(inspector) as base_url, headless_chromium(*browser) as driver:  # type: ignore[arg-type]
        wait = WebDriverWait(driver, WAIT_S, ignored_exceptions=[StaleElementReferenceException])

        # The list, newest first; the status filter.
        driver.get(base_url + "/")
        assert task_ids(driver) == ["run-max-steps", "run-<hostile>", "run-refund", "run-completed"]
        shoot(driver, "runs")
        Select(driver.find_element(By.ID, "filter-status")).select_by_value("waiting")
        driver.find_element(By.ID, "filter-button").click()
        wait.until(lambda d: task_ids(d) == ["run-refund"])
        Select(driver.find_element(By.ID, "filter-status")).select_by_value("")
        Select(driver.find_element(By.ID, "filter-stop_reason")).select_by_value("max_steps")
        driver.find_element(By.ID, "filter-button").click()
        wait.until(lambda d: task_ids(d) == ["run-max-steps"])

        # A run: its timeline and the diagram with its path.
        driver.get(base_url + "/")
        driver.find_element(By.LINK_TEXT, "run-completed").click()
        wait.until(expected_conditions.text_to_be_present_in_element((By.ID, "task-id"), "run-completed"))
        kinds = [cell.text for cell in driver.find_elements(By.CSS_SELECTOR, "#timeline td.kind")]
        assert kinds[0] == "run_started"
        assert kinds[-1] == "stop"
        assert {"proposal", "validation", "tool_result"} <= set(kinds)
        diagram = driver.find_element(By.ID, "diagram")
        if diagram.tag_name == "img":  # graphviz: the SVG loaded
            wait.until(lambda d: d.execute_script("return arguments[0].naturalWidth", diagram) > 0)
        else:
            assert "stateDiagram" in diagram.text
        shoot(driver, "run")

        # A goal with markup is text: no script ran, the markup shows as written.
        driver.get(base_url + "/runs/run-%3Chostile%3E")
        assert driver.find_element(By.ID, "goal").text == HOSTILE_GOAL
        assert driver.title == "Run run-<hostile> · boundloop"
        assert [s.get_attribute("src") for s in driver.find_elements(By.TAG_NAME, "script")] == [
            base_url + "/static/live.js"
        ]

        # A POST without the CSRF token is refused (made by the page itself, cookies and all).
        driver.get(base_url + "/approvals")
        status = driver.execute_async_script(
            FETCH_STATUS, "/runs/run-refund/decide", "POST", {"decision:toolu_1_refund": "approve"}
        )
        assert status == 403
        assert stored(store.path, "run-refund").stop_reason is StopReason.NEEDS_HUMAN

        # Approve the refund: the run resumes in the server and its page follows it to the end.
        assert SECRET not in driver.page_source
        shoot(driver, "approvals")
        driver.find_element(By.CSS_SELECTOR, "input[name='decision:toolu_1_refund'][value='approve']").click()
        driver.find_element(By.CSS_SELECTOR, "button.decide").click()
        wait.until(expected_conditions.text_to_be_present_in_element((By.ID, "stop-reason"), "completed"))
        assert driver.current_url == base_url + "/runs/run-refund"
        assert driver.find_element(By.ID, "status").text == "stopped"
        assert "Refunded O-104: 25 EUR." in driver.find_element(By.ID, "answer").text
        shoot(driver, "approved")
        assert inspector_runs.REFUNDS == ["run-refund:1:toolu_1_refund"]
        assert stored(store.path, "run-refund").stop_reason is StopReason.COMPLETED

        # Approving again changes nothing, and says so.
        driver.get(base_url + "/approvals")
        assert driver.find_element(By.ID, "none-waiting").text == "No run waits for a human."


def test_with_a_token_the_browser_logs_in(store: SQLiteStore, browser: tuple[str, str]) -> None:
    inspector = app(store, None, token="browser-token")
    with serving(inspector) as base_url, headless_chromium(*browser) as driver:  # type: ignore[arg-type]
        driver.get(base_url + "/")
        assert driver.find_elements(By.ID, "runs") == []
        assert driver.execute_async_script(FETCH_STATUS, "/", "GET", None) == 401
        driver.find_element(By.ID, "token").send_keys("browser-token")
        driver.find_element(By.ID, "login").click()
        WebDriverWait(driver, WAIT_S).until(expected_conditions.presence_of_element_located((By.ID, "runs")))
        assert len(task_ids(driver)) == 4
        assert driver.execute_async_script(FETCH_STATUS, "/", "GET", None) == 200
        assert driver.get_cookie("boundloop_session")["httpOnly"] is True  # type: ignore[index]
        assert driver.find_element(By.ID, "read-only").is_displayed()
