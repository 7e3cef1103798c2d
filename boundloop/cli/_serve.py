"""`boundloop serve --store STORE`: the inspector (`boundloop.web`) under uvicorn, and
`boundloop runs --store STORE`: every run of a store, newest first."""

from __future__ import annotations

import argparse
import ipaddress
import json
from typing import TYPE_CHECKING, Any

import anyio

from .. import AgentLoop, CheckpointCorrupt, CheckpointStore, ConfigurationError
from ..checkpoint.paging import in_tree_order, page_runs
from ..redaction import Redactor
from ._errors import EXIT_OK, CommandError
from ._pending import when
from ._pools import open_pool_store
from ._run import load_target, make_loop
from ._store import close_store, open_store, store_errors, store_failure

if TYPE_CHECKING:
    from dbos import DBOSClient


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_command(args: argparse.Namespace) -> int:
    """Serve the inspector over `--store` until Ctrl-C.

    Args:
        args: the parsed arguments of `boundloop serve`.

    Returns:
        0 when the server stops.

    Raises:
        CommandError: a host other than loopback without --token, the store or --loop SPEC is
            unusable, or the `web` extra is missing.
    """
    path: str = args.store
    host: str = args.host
    port: int = args.port
    token: str | None = args.token
    spec: str | None = args.loop
    dbos_url: str | None = args.dbos_url
    if not is_loopback(host) and not token:
        raise CommandError(f"--host {host} is reachable from other machines: give --token too")
    try:
        import uvicorn

        from ..web import app
    except ModuleNotFoundError as exc:
        raise CommandError(
            f"boundloop serve needs the web extra: pip install 'boundloop[web]' ({exc})"
        ) from exc
    store = open_store(path)
    pools = None if args.pools is None else open_pool_store(args.pools, "--pools")
    target = None if spec is None else load_target(spec, args.app_dir)
    client = None if dbos_url is None else dbos_client(dbos_url)

    async def serve() -> None:
        loop: AgentLoop[Any] | None = (
            None if target is None or spec is None else await make_loop(spec, target)
        )
        try:
            inspector = app(store, loop, token=token, dbos_client=client, pools=pools)
        except ConfigurationError as exc:
            raise CommandError(str(exc)) from exc
        modes = [] if loop is None else [f"approvals resume through {spec}"]
        if client is not None:
            modes.append("runs waiting in their DBOS workflow get the decision there")
        mode = "; ".join(modes) or "read-only"
        print(f"boundloop inspector on http://{host}:{port}/ ({mode})", flush=True)
        config = uvicorn.Config(inspector, host=host, port=port, log_level="warning")
        try:
            await uvicorn.Server(config).serve()
        finally:
            await close_store(store)
            close = getattr(pools, "aclose", None)
            if close is not None:
                await close()
            if client is not None:
                client.destroy()

    anyio.run(serve)
    return EXIT_OK


def dbos_client(url: str) -> DBOSClient:
    """A `DBOSClient` on the workers' DBOS system database.

    Raises:
        CommandError: the dbos extra is missing, or the database cannot be used.
    """
    try:
        from dbos import DBOSClient
    except ModuleNotFoundError as exc:
        raise CommandError(f"--dbos-url needs the dbos extra: pip install 'boundloop[dbos]' ({exc})") from exc
    try:
        return DBOSClient(system_database_url=url)
    except Exception as exc:  # the driver's errors: one sentence, never a traceback
        raise CommandError(
            f"--dbos-url: cannot use the DBOS system database: {type(exc).__name__}: {exc}"
        ) from exc


def runs_command(args: argparse.Namespace) -> int:
    """List a store's runs, newest first: status, stop reason, steps, cost, goal.

    Args:
        args: the parsed arguments of `boundloop runs`.

    Returns:
        0.

    Raises:
        CommandError: the store is missing or unreadable, or --limit/--cursor is invalid.
    """
    path: str = args.store
    store = open_store(path)
    try:
        records, cursor = anyio.run(_runs, store, args.status, args.stop_reason, args.limit, args.cursor)
    except ConfigurationError as exc:
        raise CommandError(str(exc)) from exc
    except CheckpointCorrupt as exc:
        raise store_failure(path, exc) from exc
    except store_errors(path) as exc:
        raise store_failure(path, exc) from exc
    if args.json:
        print(json.dumps({"runs": records, "next_cursor": cursor}, indent=2, ensure_ascii=False))
        return EXIT_OK
    if not records:
        print(f"no run in {path} matches")
    listed = {record["task_id"] for record in records}
    for depth, record in as_tree(records):
        cost = "-" if record["cost_usd"] is None else f"${record['cost_usd']:.4f}"
        parent = record["parent_task_id"]
        mark = "  " * (depth - 1) + "  └ " if depth else ""
        orphan = f"  (child of {parent})" if parent is not None and parent not in listed else ""
        print(
            f"{mark}{record['task_id']}  {record['status']}  {record['stop_reason'] or '-'}  "
            f"step {record['step']}  {cost}  {record['updated_at']}  {record['goal']}{orphan}"
        )
    if cursor is not None:
        print(f"more: --cursor {cursor}")
    return EXIT_OK


def as_tree(records: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """The page's runs with their depth, each delegated run right under its parent when its
    parent is on the page (`in_tree_order`)."""
    by_id = {record["task_id"]: record for record in records}
    parents = {task_id: record["parent_task_id"] for task_id, record in by_id.items()}
    children = {task_id: record["children"] for task_id, record in by_id.items()}
    return [(depth, by_id[task_id]) for depth, task_id in in_tree_order(list(by_id), parents, children)]


async def _runs(
    store: CheckpointStore, status: Any, stop_reason: str | None, limit: int, cursor: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    redact = Redactor()
    try:
        page = await page_runs(store, status=status, stop_reason=stop_reason, limit=limit, cursor=cursor)
        records: list[dict[str, Any]] = []
        for row in page.runs:
            record: dict[str, Any] = {
                "task_id": row.task_id,
                "status": row.status,
                "stop_reason": row.stop_reason,
                "step": row.step,
                "updated_at": when(row.updated_at),
                "goal": None,
                "model": None,
                "cost_usd": None,
                "parent_task_id": None,
                "children": [],
            }
            try:
                state = await store.load(row.task_id)
            except CheckpointCorrupt as exc:
                record["error"] = str(exc)
                state = None
            if state is not None:
                record["goal"] = " ".join(redact(state.goal).split())
                record["model"] = None if state.provenance is None else state.provenance.model
                record["cost_usd"] = state.usage.cost_usd
                record["parent_task_id"] = state.parent_task_id
                record["children"] = list(state.children)
            records.append(record)
        return records, page.next_cursor
    finally:
        await close_store(store)
