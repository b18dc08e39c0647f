"""Test doubles for the tuner's GPU side, and the checks that several
processes on one storage ran one study (used by the CPU and GPU tiers)."""

from __future__ import annotations

import json
import time
from concurrent.futures import Future
from pathlib import Path

from mneme_cc.replay import outcome as oc
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.tune import executor as real_executor
from mneme_cc.tune.executor import TrialResult
from mneme_cc.tune.properties import DeviceProperties

H100 = DeviceProperties(name="NVIDIA H100", arch="sm_90", multiprocessors=132,
                        max_threads_per_block=1024, max_threads_per_multiprocessor=2048,
                        max_blocks_per_multiprocessor=32, max_registers_per_block=65536,
                        max_shared_per_block_optin=232448)


class FakeExecutor:
    """The GPU stage as a rule: O0 computes something else, a 32-register cap
    does not compile, 8 blocks per SM hang, 7 fault; the rest verify, faster
    at higher levels and with specialisation."""

    submitted: list[ReplayConfig] = []

    def __init__(self, instance, devices, compile_workers, cache_dir, trial_timeout,
                 compile_timeout):
        self.workers, self.restarts = list(devices), 0
        self.probe_compile_seconds = 0.0
        self.start_seconds = {"gpu": 0.0, "compile": 0.0}

    def cancel(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def evaluate(self, config):
        return self.submit(config).result()

    def submit(self, config):
        FakeExecutor.submitted.append(config)
        future = Future()
        if config.baseline:
            result = TrialResult(oc.VERIFIED, config, median_ms=1.0, samples_ms=[1.0])
        elif config.pipeline == "default<O0>":
            result = TrialResult(oc.FAILED_VERIFICATION, config, error="allocation 0x1: differs")
        elif config.max_registers == 32:
            result = TrialResult(oc.COMPILE_ERROR, config, error="ptxas rejected the kernel")
        elif config.min_blocks_per_sm == 8:
            result = TrialResult(oc.TIMEOUT, config, error="no result within 1 s")
        elif config.min_blocks_per_sm == 7:
            result = TrialResult(oc.RUNTIME_ERROR, config, error="CUDA_ERROR_ILLEGAL_ADDRESS")
        else:
            ms = 1.0 - 0.1 * int(config.pipeline[-2]) - 0.05 * bool(config.specialize_args)
            result = TrialResult(oc.VERIFIED, config, median_ms=ms, samples_ms=[ms],
                                 registers=32, cubin_bytes=4096)
        future.set_result(result)
        return future


class SlowFakeExecutor(FakeExecutor):
    """Takes 50 ms per trial: long enough that a second process, which needs
    about a second to start, still finds trials to take."""

    def submit(self, config):
        time.sleep(0.05)
        return super().submit(config)


class NoSecondGpuExecutor(SlowFakeExecutor):
    """As SlowFakeExecutor, but a replay worker cannot start on device 1."""

    def __init__(self, instance, devices, **kwargs):
        if 1 in devices:
            from mneme_cc.errors import MnemeError

            raise MnemeError("GPU worker on device 1: cuInit failed (CUDA_ERROR_NO_DEVICE)")
        super().__init__(instance, devices, **kwargs)


def assert_one_study(storage, study_name: str, trials: int, processes: int,
                     jsonl: list[Path]) -> list:
    """Every trial finished exactly once, none lost, none duplicated."""
    import optuna

    study = optuna.load_study(study_name=study_name, storage=storage)
    frozen = study.get_trials(deepcopy=False)
    state = optuna.trial.TrialState
    assert all(t.state in (state.COMPLETE, state.FAIL, state.PRUNED) for t in frozen), \
        [t.state for t in frozen]
    # Each process stops asking once the study holds `trials`; two asking
    # at the same moment may add one more each, and each may have asked its
    # askers for a few that the others did not count yet.
    from mneme_cc.tune.askers import AHEAD, ASKERS_PER_GPU

    assert trials <= len(frozen) <= trials + (processes - 1) * (1 + AHEAD * ASKERS_PER_GPU)
    assert sorted(t.number for t in frozen) == list(range(len(frozen)))
    told = [json.loads(line)["trial"] for path in jsonl for line in
            path.read_text().splitlines()]
    evaluated = [t.number for t in frozen if "result" in t.user_attrs]
    assert sorted(told) == sorted(evaluated)  # each evaluated trial recorded once
    return frozen


class HangingExecutor(FakeExecutor):
    """Baselines finish; every trial hangs until cancel(), which ends it as a
    real executor does (or, with `deaf`, never: the tuner must close it anyway)."""

    deaf = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pending: list[tuple[Future, ReplayConfig]] = []

    def submit(self, config):
        if config.baseline:
            return super().submit(config)
        future = Future()
        self.pending.append((future, config))
        return future

    def cancel(self):
        if not self.deaf:
            for future, config in self.pending:
                if not future.done():
                    future.set_result(TrialResult(oc.CANCELLED, config, error="cancelled"))


#: What a sleeping worker takes per configuration: a compile, a GPU replay.
SLEEP_COMPILE_S, SLEEP_GPU_S = 0.040, 0.003


def sleeping_compile_main(conn, *_):
    """A compile process that answers as the real one does after sleeping a
    compile's time (no processor used): a 60 kB cubin each."""
    import time

    from mneme_cc.tune.workers import _messages

    conn.send({"ready": True})
    for _config, _arch, probe_variants in _messages(conn):
        time.sleep(SLEEP_COMPILE_S)
        if probe_variants:
            conn.send(("", {}))
            continue
        resources = dict.fromkeys(("spill_stores", "spill_loads", "local_bytes",
                                   "shared_bytes", "constant_bytes"), 0)
        conn.send(("", {"ptxas": SLEEP_COMPILE_S}, {
            "cubin": bytes(60_000), "resources": {"registers": 32, **resources},
            "cache_hit": False, "assembler": "ptxas"}))


def sleeping_gpu_main(conn, *_):
    """A GPU worker that answers as the real one does after sleeping a
    replay's time: verified, its time a fixed function of the configuration."""
    import hashlib
    import time

    from mneme_cc.tune.workers import _inbox

    conn.send({"ready": "sm_90"})
    for config_json, *_rest in _inbox(conn):
        time.sleep(SLEEP_GPU_S)
        ms = 1.0 + int(hashlib.sha256(config_json.encode()).hexdigest()[:4], 16) / 65536
        conn.send({"outcome": oc.VERIFIED, "median_ms": ms, "samples_ms": [ms] * 5,
                   "registers": 32, "spill_bytes": 0, "cubin_bytes": 60_000,
                   "occupancy": 1.0, "mismatches": [], "replay_seconds": {"time": SLEEP_GPU_S},
                   "error": "", "raced": False, "probe_pending": False})


def flaky_worker_main(conn, marker: str, *_):
    """A worker process that answers once and cannot start again (its first
    start leaves a marker file; a second start finds it and says why)."""
    import os

    if os.path.exists(marker):
        conn.send({"fatal": "the GPU is gone"})
        return
    open(marker, "w").close()
    conn.send({"ready": "sm_90"})
    while (message := conn.recv()) is not None:
        conn.send({"outcome": "runtime_error", "echo": message})
        os._exit(3)


def restoring_gpu_main(conn, *args):
    """A GPU worker that takes RESTORE_S to start (its restore), then sleeps
    a replay's time per configuration."""
    import time

    time.sleep(RESTORE_S)
    sleeping_gpu_main(conn, *args)


RESTORE_S = 2.0


def slow_start_worker_main(conn, *_):
    """A worker process whose start takes longer than any test waits (a GPU
    worker restoring a large instance)."""
    import time

    time.sleep(60)
    conn.send({"ready": "sm_90"})


def echo_worker_main(conn, *_):
    """A worker process that echoes each message, slowly enough that a
    second message arrives while it works on the first, and says whether
    one was waiting for it by then."""
    import time

    conn.send({"ready": "sm_90"})
    while (message := conn.recv()) is not None:
        time.sleep(0.2)
        conn.send({"outcome": "verified", "echo": message, "next_waiting": conn.poll()})


def busy_worker_main(conn, *_):
    """A GPU worker's reading of its pipe around a replay that never ends
    ("hang"): what arrives meanwhile is read all the same."""
    import time

    from mneme_cc.tune.workers import _inbox

    conn.send({"ready": "sm_90"})
    for message in _inbox(conn):
        if message == "hang":
            time.sleep(3600)
        conn.send({"outcome": "verified", "bytes": len(message)})


class SleepingCompiler(real_executor.Worker):
    target = staticmethod(sleeping_compile_main)


class SleepingGpu(real_executor.GpuWorker):
    target = staticmethod(sleeping_gpu_main)


class EmulatedExecutor(real_executor.ReplayExecutor):
    """The real executor (its threads, pipes and worker processes), whose
    compile processes and GPU workers only sleep a compile's and a replay's time."""

    compiler_class, gpu_worker_class = SleepingCompiler, SleepingGpu
