"""Small helpers the bench scripts share (they run as `python bench/<script>.py`, so this is importable)."""

from __future__ import annotations

import sys
import time
from pathlib import Path


def table(title: str, header: list[str], rows: list[list]) -> None:
    """Prints a Markdown table under a ### title."""
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")


def remove_cgroups(cgroups: list[Path]) -> None:
    """rmdir each cgroup; killed tasks leave a cgroup only once reaped, hence the retries."""
    for cg in cgroups:
        for _ in range(50):
            try:
                cg.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
        else:
            print(f"warning: could not remove cgroup {cg}", file=sys.stderr)
