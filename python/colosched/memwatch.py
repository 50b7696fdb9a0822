"""Memory-threshold notification for a process group (spec 004), so an application trims its own
caches before its memory cgroup's hard limit makes the kernel do it.

    from colosched import memwatch

    for ev in memwatch.watch("/sys/fs/cgroup/memory/myapp", ["256M", "80%"]):
        if ev.direction == "up":
            trim(hard=ev.threshold == "80%")

    handle = memwatch.on_threshold("/sys/fs/cgroup/memory/myapp", ["256M"], callback)
    ...
    handle.stop()

The watching is done by the Rust `MemoryThresholdWatcher` (`colosched._native.MemWatch`): cgroup
v1 eventfd thresholds, or on cgroup v2 `memory.events`, PSI and `memory.current` polling. This
module adds only the generator, the background thread and the `Event` type. Thresholds are bytes
(an int) or strings like "256M", "1G", "80%" (of the group's limit).
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Callable, Union

from colosched import _native

ThresholdSpec = Union[int, str]

# How long one native wait blocks before Python gets control back (Ctrl-C, generator close).
_SLICE_S = 0.25


@dataclass(frozen=True)
class Event:
    """One notification. `direction` is "up", "down", "event" (a v2 memory.events counter or a
    PSI trigger, named by `threshold`) or "gone" (the cgroup was removed: the last event).
    `monotonic_ns` is when the watcher woke and read `usage`, on `time.monotonic_ns()`'s clock."""

    time: float
    cgroup: str
    threshold: str
    threshold_bytes: int | None
    direction: str
    usage: int | None
    limit: int | None
    count: int
    backend: str
    monotonic_ns: int


def _specs(thresholds: Iterable[ThresholdSpec]) -> list[str]:
    if isinstance(thresholds, (str, int)):
        thresholds = [thresholds]
    out = []
    for t in thresholds:
        if isinstance(t, bool) or not isinstance(t, (int, str)):
            raise ValueError(f"threshold {t!r}: give bytes (int) or a string like '256M' or '80%'")
        out.append(str(t))
    return out


class Watcher:
    """A registered watch on one memory cgroup; close it (or use `with`) to unregister.

    `backend` is "v1", "v2", "poll" or "psi"; `describe` says what is used; `thresholds` lists
    (label, bytes) ascending; `limit` is the limit percentages are of (the group's own or, when
    it has none, its nearest ancestor's). `period` (seconds) is the polling path's, the watcher's
    own default (0.1 s) if None. `debounce` (seconds) reports a threshold crossing only once
    usage stayed on its new side that long.
    """

    def __init__(
        self,
        cgroup: str,
        thresholds: Iterable[ThresholdSpec],
        *,
        memsw: bool = False,
        backend: str = "auto",
        period: float | None = None,
        high: ThresholdSpec | None = None,
        psi: str | None = None,
        debounce: float | None = None,
    ):
        self._w = _native.MemWatch(
            str(cgroup),
            _specs(thresholds),
            memsw=memsw,
            backend=backend,
            period=period,
            high=None if high is None else str(high),
            psi=psi,
            debounce=debounce,
        )
        self.backend: str = self._w.backend
        self.describe: str = self._w.describe
        self.limit: int | None = self._w.limit
        self.thresholds: list[tuple[str, int]] = list(self._w.thresholds)

    def wait(self, timeout: float | None = None) -> list[Event]:
        """The events of the next wake-up, in order; [] after `timeout` seconds or a stop."""
        return [Event(**d) for d in self._w.wait(timeout)]

    @property
    def finished(self) -> bool:
        return self._w.finished

    def __iter__(self) -> Iterator[Event]:
        while not self._w.finished:
            yield from self.wait(_SLICE_S)

    def stop(self) -> None:
        """Wakes a blocked `wait` from another thread and ends the watch."""
        self._w.stop()

    def close(self) -> None:
        """Unregisters everything now (closes the eventfds, puts memory.high back)."""
        self._w.close()

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def watch(cgroup: str, thresholds: Iterable[ThresholdSpec], **options) -> Iterator[Event]:
    """Registers now (bad input raises ValueError here) and returns an iterator of events that
    ends after the cgroup is removed (a last "gone" event); closing it unregisters. Options as
    for `Watcher`."""
    return _events(Watcher(cgroup, thresholds, **options))


def _events(w: Watcher) -> Iterator[Event]:
    with w:
        yield from w


class ThresholdThread:
    """A background thread calling `callback(event)` for each event; see `on_threshold`."""

    def __init__(self, watcher: Watcher, callback: Callable[[Event], object]):
        self.watcher = watcher
        self.errors: list[BaseException] = []
        self._callback = callback
        self._thread = threading.Thread(target=self._run, name="colosched-memwatch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self.watcher.finished:
                for ev in self.watcher.wait(None):
                    try:
                        self._callback(ev)
                    except Exception as e:  # the application's bug must not end the watch
                        self.errors.append(e)
                        traceback.print_exc(file=sys.stderr)
        finally:
            self.watcher.close()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stops the thread and unregisters everything; waits for it up to `timeout` s."""
        self.watcher.stop()
        self.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)


def on_threshold(
    cgroup: str,
    thresholds: Iterable[ThresholdSpec],
    callback: Callable[[Event], object],
    **options,
) -> ThresholdThread:
    """Registers now (errors raise here, in the caller's thread), then calls `callback(event)`
    from a background thread until `stop()` or the cgroup is removed. An exception in the
    callback is printed and kept in `.errors`; the watch goes on."""
    return ThresholdThread(Watcher(cgroup, thresholds, **options), callback)
