"""`python -m benchmarks [--quick] [--write]`: run the suite (see `benchmarks/suite.py`)."""

from benchmarks.suite import main

main()
