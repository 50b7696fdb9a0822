"""colosched: rebalance colocated latency-critical (LC) and best-effort (BE) workloads.

The Rust engine does the work (`colosched._native`); this package adds the command line
(`colosched ...`), the Python API (`colosched.cluster.run`) and the reports.
"""

from colosched._native import TraceInputError, __version__

__all__ = ["TraceInputError", "__version__"]
