"""The launch timer's batches and racing, against a device double that plays
back kernel times (the GPU tier times real launches)."""

from __future__ import annotations

import pytest

from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.running import device as dev
from mneme_cc.replay.running import timer as timer_module
from mneme_cc.replay.running.timer import (
    RACE_LAUNCHES,
    SETTLE_LAUNCHES,
    SETTLED_FLOOR_MS,
    SETTLED_SPREAD,
    TIMING_BATCH,
    LaunchTimer,
    settled,
)


class Gate:
    def hold(self, stream):
        pass

    def open(self):
        pass

    def close(self):
        pass


class PlaybackDevice:
    """Each launch takes the next of `times` ms; counts launches and host waits."""

    stream = "stream"

    def __init__(self, times):
        self.times, self.launched, self.waits = list(times), 0, 0
        self.recorded: dict[int, int] = {}  # stop event -> the launch it closed
        self.serial = 0

    def create_event(self):
        self.serial += 1
        return self.serial

    def destroy_event(self, event):
        pass

    def record_event(self, event, what):
        self.recorded[event] = self.launched

    def wait_event(self, event, what):
        self.waits += 1

    def elapsed_ms(self, start, stop, what):
        return self.times[self.recorded[stop] - 1]

    def launch(self):
        self.launched += 1


@pytest.fixture(autouse=True)
def no_gate(monkeypatch):
    monkeypatch.setattr(dev, "LaunchGate", Gate)


def timed(times, config, stop_above_ms=None):
    device = PlaybackDevice(times)
    samples = LaunchTimer(device).time(config, lambda: None, device.launch, stop_above_ms)
    return samples, device


def test_a_trial_not_raced_is_timed_in_full_in_batches():
    config = ReplayConfig(iterations=40, warmup=3)
    samples, device = timed([5.0] * 3 + [float(i) for i in range(40)], config)
    assert samples == [float(i) for i in range(40)]
    assert device.launched == 43 and device.waits == -(-43 // TIMING_BATCH)


def test_a_slower_trial_stops_after_its_first_timed_launches():
    config = ReplayConfig(iterations=20, warmup=3)
    samples, device = timed([9.0] * 23, config, stop_above_ms=2.0)
    assert samples == [9.0] * RACE_LAUNCHES
    assert device.launched == 3 + RACE_LAUNCHES and device.waits == 1


def test_a_trial_whose_fastest_launch_beats_the_time_goes_on():
    """One launch under the time to beat is enough to time the rest (its
    samples vary, so they do not settle it either)."""
    config = ReplayConfig(iterations=20, warmup=1)
    times = [9.0, 9.0, 1.5, 9.0] + [1.0] * 17
    samples, device = timed(times, config, stop_above_ms=2.0)
    assert len(samples) == 20 and device.launched == 21 and device.waits == 3


def test_a_raced_trial_whose_samples_agree_stops_once_settled():
    """Within SETTLED_SPREAD of their median, SETTLE_LAUNCHES timed launches
    are the trial's time, whether it beats the best or not."""
    config = ReplayConfig(iterations=20, warmup=2)
    times = [3.0, 3.0] + [1.0, 1.002, 0.999, 1.001, 1.0] + [5.0] * 15
    samples, device = timed(times, config, stop_above_ms=2.0)
    assert samples == times[2:2 + SETTLE_LAUNCHES]
    assert device.launched == 2 + SETTLE_LAUNCHES and device.waits == 2


def test_samples_that_spread_more_are_timed_in_full():
    config = ReplayConfig(iterations=20, warmup=0)
    spread = 1.0 + 2 * SETTLED_SPREAD
    times = [1.0, spread, 1.0, 1.0, 1.0] + [1.0] * 15
    samples, device = timed(times, config, stop_above_ms=2.0)
    assert len(samples) == 20 and device.launched == 20 and device.waits == 3


@pytest.mark.parametrize("iterations", [4, SETTLE_LAUNCHES])
def test_a_trial_of_few_launches_only_races(iterations):
    """Settling needs more timed launches than it looks at."""
    config = ReplayConfig(iterations=iterations, warmup=1)
    samples, device = timed([1.0] * (1 + iterations), config, stop_above_ms=2.0)
    assert len(samples) == iterations and device.launched == 1 + iterations


def test_a_long_warm_up_still_settles_at_its_end(monkeypatch):
    monkeypatch.setattr(timer_module, "TIMING_BATCH", 4)
    config = ReplayConfig(iterations=10, warmup=6)
    samples, device = timed([1.0] * 16, config, stop_above_ms=2.0)
    assert samples == [1.0] * SETTLE_LAUNCHES and device.launched == 6 + SETTLE_LAUNCHES


def test_only_a_raced_trial_settles():
    """Baselines and the application's time (no time to beat) run every launch."""
    config = ReplayConfig(iterations=20, warmup=0)
    samples, device = timed([1.0] * 20, config)
    assert len(samples) == 20 and device.waits == 1


@pytest.mark.parametrize("samples, agree", [
    ([1.0] * 5, True), ([1.0, 1.003, 0.999, 1.0, 1.0], True),
    ([1.0, 1.01, 1.0, 1.0, 1.0], False), ([0.0] * 5, False),
    # A 0.16 ms kernel: 0.95 us apart is within the floor, twice it is not.
    ([0.164, 0.16495, 0.1645, 0.164, 0.1642], True),
    ([0.164, 0.165, 0.1645, 0.164, 0.164], True),  # two of the events' 0.5 us steps
    ([0.164, 0.164 + 2 * SETTLED_FLOOR_MS, 0.164, 0.164, 0.164], False),
    # A 10 us kernel: 1 us would be 10%; 2% of it is the floor there.
    ([0.010, 0.0102, 0.010, 0.010, 0.010], True), ([0.010, 0.0105, 0.010, 0.010, 0.010], False)])
def test_settled_is_the_range_against_the_median(samples, agree):
    assert settled(samples) is agree


def test_a_trial_with_few_launches_is_not_raced():
    config = ReplayConfig(iterations=RACE_LAUNCHES, warmup=0)
    samples, _ = timed([9.0] * RACE_LAUNCHES, config, stop_above_ms=2.0)
    assert samples == [9.0] * RACE_LAUNCHES


def test_a_long_warm_up_still_races_at_its_end(monkeypatch):
    """Warm-up past a batch: the batches end where the race is decided."""
    monkeypatch.setattr(timer_module, "TIMING_BATCH", 4)
    config = ReplayConfig(iterations=10, warmup=6)
    samples, device = timed([9.0] * 16, config, stop_above_ms=2.0)
    assert samples == [9.0] * RACE_LAUNCHES and device.launched == 6 + RACE_LAUNCHES
