"""memwatch on a real cgroup v2 memory controller: the host binds its memory controller to cgroup v1,
so the Debian cloud kernel boots under qemu TCG (tests/numa_guest/) with cgroup2 mounted and the
memory controller enabled, and the static `colosched-agent memwatch` and `memwatch` binaries watch
groups while a static allocator (tests/numa_guest/memhog.c, built here with `cc -static`) allocates
in them. One boot runs every check (tests/numa_guest/memwatch_init.sh): thresholds crossed up and
down (v2 polling of memory.current, and --backend poll), memory.high as the soft line and put back,
a PSI trigger on memory.pressure, memory.events high/max/oom/oom_kill, a percentage of the nearest
ancestor's limit, --debounce, the group removed while watched, and the bad input v1 also refuses.

Needs the Debian packages `qemu-system-x86` and `busybox-static` (make sysdeps; without them the
test skips, saying so), a C compiler with a static libc (gcc, libc6-dev) and the static binaries
(make agent-static): those missing is a failure, not a skip.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from numa_guest import guest

BOOT_TIMEOUT_S = 300.0
BUILD_TIMEOUT_S = 3600
INIT_SCRIPT = guest.HERE / "memwatch_init.sh"
MEMHOG_SOURCE = guest.HERE / "memhog.c"
MEMWATCH_BIN = guest.AGENT_BIN.parent / "memwatch"
M = 1 << 20


class Run(guest.Console):
    """The guest's console: `MW` lines and blocks (`guest.Console`)."""

    def events(self, name: str) -> list[dict]:
        text = self.blocks.get(f"{name}.out")
        assert text is not None, self.why(f"no output block of the {name} watch")
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as e:
            raise AssertionError(self.why(f"{name}: output is not JSON lines: {e}\n{text}")) from e

    def watch(self, name: str) -> tuple[list[dict], str]:
        """A watch's events and stderr; it must have ended with exit 0 (SIGTERM or `gone`)."""
        err = self.blocks.get(f"{name}.err", "")
        code = self.one("exit", name=name)["code"]
        assert code == "0", self.why(f"{name}: memwatch exited {code}; stderr:\n{err}")
        return self.events(name), err


@pytest.fixture(scope="module")
def static_binaries() -> tuple[Path, Path]:
    """The static agent and memwatch binaries; `make agent-static` builds both."""
    guest.static_binaries(guest.AGENT_BIN, MEMWATCH_BIN, timeout=BUILD_TIMEOUT_S)
    return guest.AGENT_BIN, MEMWATCH_BIN


@pytest.fixture(scope="module")
def memhog(tmp_path_factory) -> Path:
    return guest.static_c(MEMHOG_SOURCE, tmp_path_factory.mktemp("memhog") / "memhog")


@pytest.fixture(scope="module")
def mw(static_binaries, memhog, tmp_path_factory) -> Run:
    guest.need(guest.qemu)
    guest.need(guest.busybox)
    kernel_image = guest.kernel()  # with the tools present, a kernel that cannot be had is an error
    agent, memwatch = static_binaries
    work = tmp_path_factory.mktemp("memwatch-guest")
    initrd = guest.build_initramfs(
        work / "initrd.gz", INIT_SCRIPT, agent, programs={"memwatch": memwatch, "memhog": memhog}
    )
    boot = guest.boot(kernel_image, initrd, work / "console.log", BOOT_TIMEOUT_S)
    print(f"memwatch guest: ran {boot.seconds:.1f} s, console in {boot.log}")
    run = Run.parse(boot, "MW")
    assert boot.returncode is not None, run.why(f"guest killed after the {BOOT_TIMEOUT_S:.0f} s timeout")
    assert not any(w == ["FATAL"] or w[:1] == ["FATAL"] for w, _ in run.lines), run.why("init script failed")
    assert [w for w, _ in run.lines if w == ["DONE"]], run.why("init script did not finish (no 'MW DONE')")
    return run


def crossings(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["threshold"], e["direction"]) for e in events if e["direction"] in ("up", "down")]


def test_guest_has_the_cgroup2_memory_controller(mw):
    assert "memory" in mw.blocks["controllers"].split(), mw.why("cgroup2 lists no memory controller")


@pytest.mark.parametrize("name, backend", [("thresholds", "v2"), ("poll", "poll")])
def test_thresholds_crossed_up_and_down_by_an_allocating_child(mw, name, backend):
    events, err = mw.watch(name)
    assert mw.one("hog", name=name)["code"] == "0", mw.why(f"{name}: memhog failed")
    assert crossings(events) == [("16M", "up"), ("50%", "up"), ("50%", "down"), ("16M", "down")], mw.why(
        f"{name}: crossings {events}"
    )
    for e in events:
        assert e["backend"] == backend and e["limit"] == 64 * M, mw.why(f"{name}: {e}")
        assert e["cgroup"] == "/sys/fs/cgroup/t"
        want = {"16M": 16 * M, "50%": 32 * M}[e["threshold"]]
        assert e["threshold_bytes"] == want, e
        # Usage read at the wake-up is on the side the event says.
        assert (e["usage"] >= want) == (e["direction"] == "up"), mw.why(
            f"{name}: usage on the wrong side: {e}"
        )
    if backend == "v2":
        assert "memory.events via poll(POLLPRI)" in err and "polling memory.current every 20 ms" in err, err
    else:
        assert "poll: 2 threshold(s) by reading memory.current every 20 ms" in err, err


def test_memory_high_is_the_soft_line_and_psi_fires(mw):
    high_file = {k: v for w, p in mw.lines if w == ["high"] for k, v in p.items()}
    assert high_file.get("before") == "max", mw.why("memory.high was not max before the watch")
    events, err = mw.watch("high")
    assert high_file.get("while") == str(16 * M), mw.why("memory.high not set to 16M while watching")
    assert high_file.get("after") == "max", mw.why("memory.high not put back to max after the watch")
    assert "memory.high set to 16777216" in err and 'PSI trigger "some 50000 1000000"' in err, err
    hog = mw.one("hog", name="high")
    assert hog["code"] == "0", mw.why("the hog over memory.high failed")
    print(f"hog 1 MiB over memory.high ran {hog['ms']} ms (throttled); events: {events}")
    high = [e for e in events if e["threshold"] == "high"]
    assert high and all(e["direction"] == "event" and e["count"] >= 1 for e in high), mw.why(
        f"no memory.events `high` event: {events}"
    )
    assert high[0]["threshold_bytes"] == 16 * M, high[0]
    psi = [e for e in events if e["threshold"] == "psi some 50000 1000000"]
    assert psi and psi[0]["direction"] == "event", mw.why(f"no PSI event on memory.pressure: {events}")
    assert not [e for e in events if e["threshold"] in ("oom", "oom_kill")], events


def test_memory_events_max_oom_and_oom_kill(mw):
    events, _ = mw.watch("oom")
    assert mw.one("hog", name="oom")["code"] == "137", mw.why("the hog past memory.max was not OOM-killed")
    seen = {e["threshold"]: e for e in events}
    for name in ("max", "oom", "oom_kill"):
        assert name in seen and seen[name]["direction"] == "event" and seen[name]["count"] >= 1, mw.why(
            f"no memory.events `{name}` event: {events}"
        )
    assert seen["max"]["threshold_bytes"] == 48 * M, seen["max"]
    counters = dict(line.split() for line in mw.blocks["events.e"].splitlines())
    assert int(counters["oom_kill"]) >= 1, counters


def test_a_percentage_of_the_nearest_ancestors_limit(mw):
    assert mw.one("child")["max"] == "max", mw.why("the child group has a limit of its own")
    events, err = mw.watch("ancestor")
    assert "nearest ancestor's, 67108864 bytes (/sys/fs/cgroup/p/memory.max)" in err, err
    assert crossings(events) == [("25%", "up"), ("25%", "down")], mw.why(f"ancestor: {events}")
    assert all(e["threshold_bytes"] == 16 * M and e["limit"] == 64 * M for e in events), events


def test_debounce_drops_a_short_excursion_and_reports_a_held_one(mw):
    events, err = mw.watch("debounce")
    assert "debounce 600 ms" in err, err
    assert crossings(events) == [("8M", "up"), ("8M", "down")], mw.why(f"debounce: {events}")
    held = events[1]["time"] - events[0]["time"]
    print(f"debounce: up and down reported {held:.2f} s apart (hold 1.5 s)")
    assert 0.8 < held < 3.0, events


@pytest.mark.parametrize("kind", ["poll", "psi"])
def test_the_cgroup_removed_while_watched_ends_the_watch(mw, kind):
    events, err = mw.watch(f"gone-{kind}")
    ms = int(mw.one("gone", kind=kind)["ms"])
    print(f"gone ({kind}): rmdir -> exit in {ms} ms")
    assert events and events[-1]["direction"] == "gone", mw.why(f"gone-{kind}: {events}")
    assert events[-1]["cgroup"] == f"/sys/fs/cgroup/g{kind}"
    assert "the cgroup is gone: exiting" in err, err
    assert ms < 5000, mw.why(f"gone-{kind}: the watch took {ms} ms to notice")


BAD_INPUT = {
    "missing": "--cgroup /sys/fs/cgroup/nope: no such cgroup directory",
    "suffix": "--threshold",
    "zero": "--threshold",
    "above-limit": "above the group's limit of 67108864 bytes (/sys/fs/cgroup/t/memory.max)",
    "no-limit-pct": "--threshold 80%: a percentage needs a memory limit",
    "memsw": "--memsw: only for cgroup v1",
    "backend-v1": "--backend V1",
    "psi-spec": "--psi",
    "debounce": "--debounce",
    "not-cgroupfs-v1": "--cgroup /run/fake-v1: not on a cgroup filesystem",
    "not-cgroupfs-v2": "--cgroup /run/fake-v2: not on a cgroup filesystem",
}


@pytest.mark.parametrize("name", sorted(BAD_INPUT))
def test_bad_input_exits_2_naming_it(mw, name):
    code = mw.one("bad", name=name)["code"]
    err = mw.blocks.get(f"bad-{name}", "")
    assert code == "2", mw.why(f"bad input {name}: exit {code}, stderr:\n{err}")
    assert BAD_INPUT[name] in err, f"{name}: {err}"


def test_nothing_written_into_a_fake_event_control(mw):
    assert mw.one("fake-v1")["event_control_bytes"] == "0", mw.why("memwatch wrote into a regular file")
