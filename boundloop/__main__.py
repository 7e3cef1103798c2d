"""`python -m boundloop`: the same command as `boundloop`."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
