"""Integrations with engines boundloop runs on; each is an optional extra, imported on its own.

- `boundloop.integrations.dbos`: an `AgentLoop` run as a DBOS durable workflow, each model call
  and each tool call a DBOS step (`pip install 'boundloop[dbos]'`, docs/dbos.md).

Importing this package imports no engine.
"""

__all__: list[str] = []
