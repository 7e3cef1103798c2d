"""Exposition: a `/metrics` HTTP server, an ASGI app, and the registry to expose.

Both endpoints negotiate the format from the scraper's `Accept` header, as Prometheus expects:
OpenMetrics (with the exemplars that carry each run's `trace_id`) when asked for it, the
classic text format (0.0.4) otherwise. In prometheus_client's multiprocess mode
(`PROMETHEUS_MULTIPROC_DIR` set), the default registry to expose is a fresh one holding a
`MultiProcessCollector`, which sums the values every worker process wrote.
"""

from __future__ import annotations

import gzip
from collections.abc import Awaitable, Callable, MutableMapping
from types import TracebackType
from typing import Any, Final, Self, TypeAlias, final
from urllib.parse import parse_qs

import anyio.to_thread
from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from .instruments import multiprocess_mode

__all__ = [
    "Message",
    "MetricsApp",
    "MetricsServer",
    "Receive",
    "Scope",
    "Send",
    "asgi_app",
    "exposed_registry",
    "multiprocess_registry",
    "render",
    "serve",
]

Scope: TypeAlias = MutableMapping[str, Any]
"""An ASGI connection scope (the same shape Starlette's `Scope` has)."""
Message: TypeAlias = MutableMapping[str, Any]
"""An ASGI event."""
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]

_SHUTDOWN_TIMEOUT_S: Final = 5.0


def multiprocess_registry(path: str | None = None) -> CollectorRegistry:
    """A fresh registry that aggregates every worker's values from the multiprocess directory.

    Args:
        path: the directory the workers write to; default: `PROMETHEUS_MULTIPROC_DIR`.

    Returns:
        A registry to expose (never to register instruments on).

    Raises:
        ValueError: no directory was given and `PROMETHEUS_MULTIPROC_DIR` is unset or missing.
    """
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]  # untyped __init__ upstream
    return registry


def exposed_registry(registry: Collector | None = None) -> Collector:
    """The registry an endpoint exposes: the one given, else the process's default.

    The default is `REGISTRY`, or a `multiprocess_registry()` in multiprocess mode.

    Args:
        registry: an explicit registry (or any prometheus collector) to expose.

    Returns:
        The collector to render on each scrape.
    """
    if registry is not None:
        return registry
    if multiprocess_mode():
        return multiprocess_registry()
    return REGISTRY


def render(registry: Collector | None = None, accept: str = "") -> tuple[bytes, str]:
    """Render a scrape in the format the `Accept` header asks for.

    Args:
        registry: what to render; default: `exposed_registry()`.
        accept: the scraper's `Accept` header; `application/openmetrics-text` selects
            OpenMetrics (with exemplars), anything else the text format 0.0.4.

    Returns:
        The body and its `Content-Type`.
    """
    encoder, content_type = choose_encoder(accept)
    return encoder(exposed_registry(registry)), content_type


@final
class MetricsServer:
    """A `/metrics` HTTP server running in a daemon thread; `close()` it, or use it with `with`."""

    __slots__ = ("_server", "_thread", "host", "port")

    def __init__(self, port: int, addr: str, registry: Collector) -> None:
        self._server, self._thread = start_http_server(port, addr=addr, registry=registry)
        self.host: str = addr
        """The address the server listens on."""
        self.port: int = self._server.server_port
        """The bound port (the real one when `serve(0)` asked for any free port)."""

    @property
    def url(self) -> str:
        """The metrics URL, e.g. `http://127.0.0.1:9464/metrics`."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving, close the socket and join the server thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(_SHUTDOWN_TIMEOUT_S)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MetricsServer(url={self.url!r})"


def serve(port: int, addr: str = "127.0.0.1", registry: Collector | None = None) -> MetricsServer:
    """Serve `/metrics` over HTTP from a daemon thread (prometheus_client's `start_http_server`).

    The address is explicit and defaults to loopback: prometheus_client's own default,
    `0.0.0.0`, would publish the metrics on every interface.

    Args:
        port: the TCP port; 0 picks a free one (read it back from `.port`).
        addr: the address to bind; `"0.0.0.0"` or `"::"` to listen on every interface.
        registry: what to expose; default: `exposed_registry()` (the process's default
            registry, or the multiprocess aggregate when `PROMETHEUS_MULTIPROC_DIR` is set).

    Returns:
        The running server; `close()` stops it.

    Raises:
        OSError: the address cannot be bound.
    """
    return MetricsServer(port, addr, exposed_registry(registry))


@final
class MetricsApp:
    """An ASGI app serving the metrics; see `asgi_app`.

    A class, not a function, so Starlette's `Route("/metrics", app)` treats it as an ASGI app
    rather than as a request handler.
    """

    __slots__ = ("_registry",)

    def __init__(self, registry: Collector | None) -> None:
        # Resolved once: a multiprocess registry re-reads the directory on every scrape.
        self._registry = exposed_registry(registry)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one ASGI connection: an HTTP scrape, or the lifespan protocol."""
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            raise RuntimeError(f"the metrics app serves HTTP, not {scope['type']!r}")
        if scope["method"] not in ("GET", "HEAD"):
            allow = [(b"allow", b"GET, HEAD"), (b"content-length", b"0")]
            await send({"type": "http.response.start", "status": 405, "headers": allow})
            await send({"type": "http.response.body", "body": b""})
            return
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]
        }
        params = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        registry = self._registry
        names = params.get("name[]")
        if names and isinstance(registry, CollectorRegistry):
            registry = registry.restricted_registry(names)
        # Rendering takes the registry's locks and, in multiprocess mode, reads files: keep it
        # off the event loop.
        body, content_type = await anyio.to_thread.run_sync(render, registry, headers.get("accept", ""))
        response_headers = [(b"content-type", content_type.encode("latin-1"))]
        if gzip_accepted(headers.get("accept-encoding", "")):
            body = gzip.compress(body)
            response_headers.append((b"content-encoding", b"gzip"))
        response_headers.append((b"content-length", str(len(body)).encode("latin-1")))
        await send({"type": "http.response.start", "status": 200, "headers": response_headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})


async def _lifespan(receive: Receive, send: Send) -> None:
    """Acknowledge startup and shutdown, so the app also runs standalone under uvicorn."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def asgi_app(registry: Collector | None = None) -> MetricsApp:
    """An ASGI app serving the metrics, to mount at `/metrics` in FastAPI or Starlette.

    Starlette: `Route("/metrics", asgi_app())`; FastAPI: `app.add_route("/metrics", asgi_app())`
    (or `app.mount("/metrics", asgi_app())`, which serves `/metrics/`).

    Args:
        registry: what to expose; default: `exposed_registry()` (the process's default
            registry, or the multiprocess aggregate when `PROMETHEUS_MULTIPROC_DIR` is set).

    Returns:
        The ASGI application.
    """
    return MetricsApp(registry)
