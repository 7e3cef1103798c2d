"""The stdio transport of `MCPServerStdio` (POSIX): a server process spoken to in lines of JSON-RPC.

The SDK's own transport reads a line of any length, in time quadratic in it; this one keeps at
most `max_message_bytes` of a line, finds each line's end in linear time, and answers what the
session cannot use with an exception in the read stream (the session's message handler gets it):
a line over the limit (`MessageTooLarge`), a line that is not JSON-RPC, the end of the output
(`ServerExited`). Stopping follows the spec: close stdin, wait, then end the process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncGenerator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

import anyio
import anyio.abc
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

STOP_WAIT_S: Final = 2.0
"""How long the server gets to exit after its stdin closes, and again after SIGTERM."""

_CHUNK: Final = 65_536


class MessageTooLarge(ValueError):
    """The server wrote a line (one JSON-RPC message) longer than `max_message_bytes`."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a message of {size} bytes, over the limit of {limit} (max_message_bytes)")
        self.size = size
        self.limit = limit


class ServerExited(ConnectionError):
    """The server's stdout ended: the process exited or closed it."""

    def __init__(self) -> None:
        super().__init__("the server process ended its output (it exited)")


@contextlib.asynccontextmanager
async def stdio_transport(
    command: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    cwd: str | Path | None,
    errlog: TextIO,
    max_message_bytes: int,
) -> AsyncGenerator[tuple[Any, ...]]:
    """Start the server; yield the session's read and write streams; stop the server at exit.

    Raises:
        OSError: the command cannot be started.
    """
    process = await anyio.open_process(
        [command, *args],
        env=get_default_environment() | dict(env or {}),
        stderr=errlog,
        cwd=cwd,
        start_new_session=True,  # its own process group: stopping it stops its children too
    )
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as group:
        group.start_soon(_read, process, read_in, max_message_bytes)
        group.start_soon(_write, process, write_out, read_in)
        try:
            yield read_out, write_in
        finally:
            with anyio.CancelScope(shield=True):  # every wait inside is bounded
                write_in.close()
                read_out.close()
                await _stop(process)
            group.cancel_scope.cancel()


async def _read(
    process: anyio.abc.Process, sink: MemoryObjectSendStream[SessionMessage | Exception], limit: int
) -> None:
    assert process.stdout is not None
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        async with sink:
            async for item in messages(process.stdout, limit):
                await sink.send(item)
            await sink.send(ServerExited())


async def messages(
    stdout: anyio.abc.ByteReceiveStream, limit: int
) -> AsyncGenerator[SessionMessage | Exception]:
    """Each line as a message, or as the reason it is none; a line is kept only up to `limit`."""
    buffer = bytearray()
    skipped = 0  # > 0: the bytes of a line over the limit, dropped so far
    while True:
        try:
            chunk = await stdout.receive(_CHUNK)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            return
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            size = skipped + len(buffer) + end - start
            if size > limit:
                yield MessageTooLarge(size, limit)
            else:
                buffer += chunk[start:end]
                if buffer.strip():
                    yield _parse(bytes(buffer))
            buffer.clear()
            skipped = 0
            start = end + 1
        rest = len(chunk) - start
        if skipped or len(buffer) + rest > limit:
            skipped += len(buffer) + rest
            buffer.clear()
        else:
            buffer += chunk[start:]


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


async def _write(
    process: anyio.abc.Process,
    source: MemoryObjectReceiveStream[SessionMessage],
    read_in: MemoryObjectSendStream[SessionMessage | Exception],
) -> None:
    assert process.stdin is not None
    try:
        async with source:
            async for message in source:
                line = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send(f"{line}\n".encode())
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        await read_in.aclose()  # the server stopped reading: the session sees the end


async def _stop(process: anyio.abc.Process) -> None:
    """Close stdin, wait; then SIGTERM the process group, wait; then SIGKILL it."""
    assert process.stdin is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    for sent in (None, signal.SIGTERM, signal.SIGKILL):
        if sent is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sent)
        with anyio.move_on_after(STOP_WAIT_S):
            await process.wait()
        if process.returncode is not None:
            break
    with contextlib.suppress(OSError), anyio.move_on_after(STOP_WAIT_S):
        await process.aclose()
