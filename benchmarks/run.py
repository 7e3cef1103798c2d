"""`python benchmarks/run.py [--quick] [--write]`: the suite, run by path (same as `python -m benchmarks`)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.suite import main

if __name__ == "__main__":
    main()
