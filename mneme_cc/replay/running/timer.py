"""`LaunchTimer`: the timed launches of a replay, measured with events.

Launches are queued in batches behind the launch gate (restore, L2 flush,
start event, launch, stop event, ...) and the gate opened once per batch:
the GPU runs them back to back while each event pair brackets one kernel
alone, and the host waits once per batch, not once per launch. A batch
stays well under the depth at which queuing would block.

A trial told a time to beat (`stop_above_ms`) is raced: its first batch
holds the warm-up and RACE_LAUNCHES timed launches, and if even the fastest
of those is slower than that time the rest are not run. A study's trials
are mostly far from its best, and timing them fully was most of the GPU's
time per trial. Such a trial also stops once SETTLE_LAUNCHES timed
launches lie within SETTLED_SPREAD of their median (within SETTLED_FLOOR_MS
where that is finer than the events resolve, at most SETTLED_FLOOR_SHARE of
the median): more launches would not move it, much as a benchmark harness
stops once its noise is low.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.running import device as dev

TIMING_BATCH = 32  # timed launches queued behind the gate at once
RACE_LAUNCHES = 3  # timed launches a raced trial runs before it may stop
SETTLE_LAUNCHES = 5  # timed launches a raced trial runs before its samples may settle it
SETTLED_SPREAD = 0.005  # their range, relative to their median, that does
# ... or their range in ms, whichever is wider: twice the resolution CUDA
# gives for an event pair's elapsed time (about 0.5 us), below which a
# 0.2 ms kernel's 0.5% cannot be told from the timer's own steps; but never
# more than SETTLED_FLOOR_SHARE of the median, so that a kernel of a few
# microseconds is still timed in full unless its launches agree.
SETTLED_FLOOR_MS = 0.001
SETTLED_FLOOR_SHARE = 0.02


class LaunchTimer:
    """Owns the gate, the events (kept for the next replay) and the L2 flush
    buffer. Made once the recorded window is reserved: the gate's mapped
    host memory takes device addresses too."""

    def __init__(self, device: dev.Device):
        self.device = device
        self.gate = dev.LaunchGate()
        self.events: list[tuple[Any, Any]] = []  # (start, stop) per timed launch
        self.flush: tuple[int, int] | None = None  # twice the L2: (address, size)

    def flush_l2(self) -> None:
        """Queues a write of twice the L2's size, which evicts what the last launch left."""
        if self.flush is None:
            size = 2 * self.device.attribute("l2_cache_size", "L2 size")
            self.flush = (self.device.alloc(size, "allocating the L2 flush"), size)
        address, size = self.flush
        self.device.memset_async(address, 0, size, "flushing L2")

    def _events(self, count: int) -> list[tuple[Any, Any]]:
        while len(self.events) < count:
            self.events.append((self.device.create_event(), self.device.create_event()))
        return self.events[:count]

    def time(self, config: ReplayConfig, restore: Callable[[], None],
             launch: Callable[[], None], stop_above_ms: float | None = None) -> list[float]:
        """Milliseconds of each timed launch, warm-up launches dropped;
        `restore` and `launch` queue their work on the device's stream.
        With `stop_above_ms`, only RACE_LAUNCHES timed launches when the
        fastest of them is slower than that, and only SETTLE_LAUNCHES when
        those agree (settled())."""
        device = self.device
        samples: list[float] = []
        if config.flush_l2:
            self.flush_l2()  # allocates its buffer now, not while the stream is held
        total = config.warmup + config.iterations
        race_at = config.warmup + RACE_LAUNCHES \
            if stop_above_ms is not None and config.iterations > RACE_LAUNCHES else None
        settle_at = config.warmup + SETTLE_LAUNCHES \
            if stop_above_ms is not None and config.iterations > SETTLE_LAUNCHES else None
        first = 0
        while first < total:
            # A raced trial's batches end where it may stop.
            end = min(at for at in (race_at, settle_at, total) if at is not None and at > first)
            size = min(TIMING_BATCH, end - first)
            batch = self._events(size)
            self.gate.hold(device.stream)
            try:
                for start, stop in batch:
                    restore()
                    if config.flush_l2:
                        self.flush_l2()
                    device.record_event(start, "timing")
                    launch()
                    device.record_event(stop, "timing")
            finally:
                self.gate.open()
            device.wait_event(batch[-1][1], "running the kernel")
            for i, (start, stop) in enumerate(batch, first):
                if i >= config.warmup:
                    samples.append(device.elapsed_ms(start, stop, "timing"))
            first += size
            if first == race_at and min(samples) > stop_above_ms:
                break
            if first == settle_at and settled(samples):
                break
        return samples

    def close(self) -> None:
        for start, stop in self.events:
            self.device.destroy_event(start)
            self.device.destroy_event(stop)
        self.events.clear()
        if self.flush:
            self.device.free(self.flush[0])
            self.flush = None
        self.gate.close()


def settled(samples: list[float]) -> bool:
    """Whether timed samples agree within SETTLED_SPREAD of their median, or
    within SETTLED_FLOOR_MS (at most SETTLED_FLOOR_SHARE of it) where wider."""
    middle = sorted(samples)[len(samples) // 2]
    tolerance = max(SETTLED_SPREAD * middle, min(SETTLED_FLOOR_MS, SETTLED_FLOOR_SHARE * middle))
    # The events' steps are exact in microseconds, not in binary ms.
    return middle > 0 and max(samples) - min(samples) <= tolerance * (1 + 1e-9)
