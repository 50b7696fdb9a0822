"""What one read of a cgroup v1 `cgroup.procs` / `tasks` file costs with 1,000 BE processes of 3
threads (bench/RESULTS.md, node agent): the kernel builds and sorts the pid list on every read
from the start. Needs root and `bench/.work/agent_perf/be_task` (built by bench/agent_perf.py).

    sudo .venv/bin/python bench/agent/tasks_read_cost.py
"""

import argparse
import os
import signal
import subprocess
import time
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup/cpu/colosched-tasks-cost")
BE_TASK = Path(__file__).resolve().parents[1] / ".work" / "agent_perf" / "be_task"
PIDFILE = Path("/tmp/colosched-tasks-cost.pids")


def cpu_per_read_ms(path: Path, reads: int) -> tuple[int, float]:
    """Entries in the file and the median CPU time of reading it whole."""
    times = []
    for _ in range(reads):
        t = time.process_time_ns()
        fd = os.open(path, os.O_RDONLY)
        data = b""
        while chunk := os.read(fd, 1 << 16):
            data += chunk
        os.close(fd)
        times.append(time.process_time_ns() - t)
        time.sleep(0.05)
    return len(data.split()), sorted(times)[reads // 2] / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=3)
    ap.add_argument("--reads", type=int, default=30)
    args = ap.parse_args()
    if not BE_TASK.exists():
        raise SystemExit(f"{BE_TASK} missing: run bench/agent_perf.py once")
    CGROUP.mkdir()
    PIDFILE.unlink(missing_ok=True)
    spawner = subprocess.Popen(
        [str(BE_TASK), "spawn", str(args.procs), str(args.threads), str(PIDFILE)], stdout=subprocess.PIPE
    )
    try:
        if not spawner.stdout.readline().decode().startswith("ready"):
            raise SystemExit("be_task spawn failed")
        for pid in PIDFILE.read_text().split():
            (CGROUP / "cgroup.procs").write_text(pid)
        for name in ("cgroup.procs", "tasks"):
            entries, ms = cpu_per_read_ms(CGROUP / name, args.reads)
            print(f"{name}: {entries} entries, CPU per read median {ms:.2f} ms")
    finally:
        spawner.send_signal(signal.SIGTERM)
        spawner.wait()
        deadline = time.monotonic() + 5
        while (left := (CGROUP / "cgroup.procs").read_text().split()) and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        CGROUP.rmdir()
        PIDFILE.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
