"""`python -m boundloop`: the same command as `boundloop`."""

from __future__ import annotations

from .cli import console

if __name__ == "__main__":
    console()
