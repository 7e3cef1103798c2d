"""Below the core, private: the helpers of the ground floor and floor 1 (the run's data, its
events, and what a user writes a loop with), shared by the public modules of those floors and
the core.

A folder, not a seam: a module of the package imports the module it needs (`from .._base.recorded
import Deferred`); nothing here imports the core, `loop`, the callers or the observers
(`tests/test_structure.py` checks it).
"""
