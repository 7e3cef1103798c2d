"""`StepFailure`: what a step raised, recorded by DBOS (pickled) and rebuilt as the same failure."""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Callable

import anthropic
import httpx2 as httpx
import pytest

from boundloop import RetryableToolError
from boundloop.integrations.dbos import ReplayedError, StepFailure
from boundloop.integrations.dbos._failures import stand_in

pytestmark = pytest.mark.asyncio_only  # DBOS runs workflows and steps on asyncio event loops


class KeywordError(Exception):
    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.code = code


class Renamed(Exception):
    """Its text is not its args: `__str__` reads an attribute its `__init__` sets."""

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what

    def __str__(self) -> str:
        return f"renamed {self.what}"


class Holding(Exception):
    def __init__(self, fn: Callable[[], None]) -> None:
        super().__init__()
        self.fn = fn

    def __str__(self) -> str:
        return f"failed in {self.fn.__name__}"


def replayed(exc: Exception) -> Exception:
    """`exc` recorded and read back, as DBOS does on a replay."""
    failure = StepFailure.of(exc)
    assert failure.rebuilt() is exc  # the execution that raised it gets the object itself
    restored = pickle.loads(pickle.dumps(failure))
    assert isinstance(restored, StepFailure)
    return restored.rebuilt()


def test_an_exception_pickle_cannot_rebuild_replays_as_its_own_class() -> None:
    exc = replayed(KeywordError("no order O-1", code=404))
    assert type(exc) is KeywordError
    assert str(exc) == "no order O-1"
    assert exc.code == 404


def test_an_api_error_replays_as_itself_without_its_response() -> None:
    request = httpx.Request("POST", "https://api.anthropic.com/v1/messages")
    original = anthropic.InternalServerError(
        "overloaded", response=httpx.Response(529, request=request), body={"type": "error"}
    )
    exc = replayed(original)
    assert isinstance(exc, anthropic.InternalServerError)
    assert str(exc) == str(original)
    assert exc.status_code == 529
    assert exc.body == {"type": "error"}


def test_a_retryable_error_keeps_its_delay() -> None:
    exc = replayed(RetryableToolError("busy", retry_after_s=1.5))
    assert isinstance(exc, RetryableToolError)
    assert exc.retry_after_s == 1.5


def test_a_local_class_replays_as_a_stand_in_of_the_same_name_and_text() -> None:
    class LocalError(Exception):
        pass

    exc = replayed(LocalError("local failure"))
    assert isinstance(exc, ReplayedError)
    assert type(exc).__name__ == "LocalError"
    assert str(exc) == "local failure"
    assert stand_in("LocalError") is type(exc)


def test_an_exception_whose_text_reads_its_attributes_replays_with_them() -> None:
    exc = replayed(Renamed("the order"))
    assert type(exc) is Renamed
    assert str(exc) == "renamed the order"


def test_an_exception_whose_text_cannot_be_rebuilt_replays_as_a_stand_in() -> None:
    """Its text reads an attribute that does not pickle: rebuilt, it would read differently."""
    exc = replayed(Holding(lambda: None))
    assert isinstance(exc, ReplayedError)
    assert type(exc).__name__ == "Holding"
    assert str(exc) == "failed in <lambda>"


def test_unpicklable_args_are_replaced_by_the_text() -> None:
    original = ValueError("bad", lambda: None)
    exc = replayed(original)
    assert type(exc) is ValueError
    assert str(exc) == str(original)


def test_the_record_names_the_failure() -> None:
    assert str(StepFailure.of(KeyError("x"))) == "KeyError: 'x'"


def test_importing_the_integration_without_dbos_says_how_to_install_it() -> None:
    code = "import sys; sys.modules['dbos'] = None; import boundloop.integrations.dbos"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "ImportError: boundloop.integrations.dbos needs DBOS" in done.stderr
    assert "pip install 'boundloop[dbos]'" in done.stderr


def test_boundloop_never_imports_dbos() -> None:
    code = (
        "import sys, boundloop, boundloop.integrations\n"
        "for name in boundloop.__all__: getattr(boundloop, name)\n"
        "assert 'dbos' not in sys.modules, 'dbos imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
