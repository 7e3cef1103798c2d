"""A loop set up wrong (no API key, a refused key, no such model) fails as a setup error.

Through the real `AsyncAnthropic`: over the fake API for the statuses the API answers, and with
no credentials at all (the SDK refuses to send, nothing reaches a transport). `run()` raises
`SetupError` with one sentence and the run is recorded `failed`; `boundloop run` exits 2 with
that sentence, where a run that stops otherwise exits 1.
"""

from __future__ import annotations

import anthropic
import httpx2
import pytest

from boundloop import AgentLoop, Budget, ConfigurationError, MemoryStore, Price, SetupError, StopReason
from boundloop.cli import main
from tests.fake_api import MODEL, ApiError, Body, FakeAPI, message, text_block

pytestmark = pytest.mark.anyio


def _loop(
    client: anthropic.AsyncAnthropic, model: str = MODEL, store: MemoryStore | None = None
) -> AgentLoop:
    prices = {model: Price(input_per_mtok=3, output_per_mtok=15)}
    return AgentLoop(client, model=model, budget=Budget(max_steps=3), store=store, prices=prices)


def _keyless() -> anthropic.AsyncAnthropic:
    def unreachable(request: httpx2.Request) -> httpx2.Response:
        raise AssertionError("a request without credentials was sent")

    return anthropic.AsyncAnthropic(
        api_key=None,
        auth_token=None,
        base_url="http://fake-anthropic.invalid",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(unreachable)),
    )


@pytest.fixture
def no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)


async def test_a_missing_api_key_is_a_setup_error_in_one_sentence(no_key_in_env: None) -> None:
    store = MemoryStore()
    with pytest.raises(SetupError) as caught:
        await _loop(_keyless(), store=store).run("Hello?", task_id="t-nokey")
    assert str(caught.value) == "ANTHROPIC_API_KEY is not set: the client has no API key or auth token"
    assert isinstance(caught.value, ConfigurationError)
    result = caught.value.result
    assert result is not None
    assert result.stop_reason is StopReason.FAILED
    stored = await store.load("t-nokey")
    assert stored is not None
    assert stored.stop_reason is StopReason.FAILED


async def test_a_model_that_does_not_exist_names_the_closest_one() -> None:
    api = FakeAPI([ApiError(status=404, type="not_found_error", message="model: claude-sonet-4-6")])
    with pytest.raises(
        SetupError, match=r"^model 'claude-sonet-4-6' does not exist; did you mean claude-sonnet-4-6\?$"
    ):
        await _loop(api.client(), model="claude-sonet-4-6").run("Hello?")


async def test_a_model_far_from_any_known_one_gets_no_guess() -> None:
    api = FakeAPI([ApiError(status=404, type="not_found_error", message="model: gpt-4o")])
    with pytest.raises(SetupError, match=r"^model 'gpt-4o' does not exist$"):
        await _loop(api.client(), model="gpt-4o").run("Hello?")


async def test_a_refused_key_is_a_setup_error() -> None:
    api = FakeAPI([ApiError(status=401, type="authentication_error", message="invalid x-api-key")])
    with pytest.raises(SetupError, match=r"refused the API key \(401\)"):
        await _loop(api.client()).run("Hello?")


async def test_a_transient_api_error_still_ends_the_run_failed_without_raising() -> None:
    api = FakeAPI([ApiError(status=529, type="overloaded_error", message="Overloaded")])
    result = await _loop(api.client()).run("Hello?")
    assert result.stop_reason is StopReason.FAILED
    assert result.state.errors[0].kind == "model_api"


async def test_a_wrong_model_after_a_good_turn_is_still_a_setup_error() -> None:
    api = FakeAPI([Body(json=message([text_block("fine")], "end_turn"))])
    loop = _loop(api.client())
    assert (await loop.run("first")).stop_reason is StopReason.COMPLETED
    api.push(ApiError(status=404, type="not_found_error", message="model: x"))
    with pytest.raises(SetupError):
        await loop.run("second")


def keyless_loop() -> AgentLoop:
    """`boundloop run` target: a loop on a client without credentials."""
    return _loop(_keyless())


def missing_model_loop() -> AgentLoop:
    """`boundloop run` target: a loop whose model the API does not have."""
    api = FakeAPI([ApiError(status=404, type="not_found_error", message="model: claude-sonet-4-6")])
    return _loop(api.client(), model="claude-sonet-4-6")


@pytest.mark.parametrize(
    ("factory", "sentence"),
    [
        ("keyless_loop", "boundloop: error: ANTHROPIC_API_KEY is not set"),
        (
            "missing_model_loop",
            "boundloop: error: model 'claude-sonet-4-6' does not exist; did you mean claude-sonnet-4-6?",
        ),
    ],
)
def test_boundloop_run_exits_2_with_one_sentence(
    factory: str, sentence: str, no_key_in_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", f"tests.test_setup_errors:{factory}", "--goal", "g", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(sentence)
    assert len(err.strip().splitlines()) == 1
