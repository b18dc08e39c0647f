"""`ReplayExecutor`: many configurations of one instance, compiled in a CPU
process pool and run by one worker process per GPU.

    with ReplayExecutor(instance, devices=[0], compile_workers=16) as ex:
        futures = [ex.submit(config) for config in configs]
        results = [f.result() for f in futures]      # TrialResult each

Each GPU worker restores the instance once and replays what it is sent.
Every trial ends in one outcome (mneme_cc.replay.outcome). A trial that runs
past `trial_timeout` gets its worker killed; a kernel fault or a dead worker
is a runtime_error; either way a fresh worker takes over and the executor
goes on.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import queue
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mneme_cc.errors import MnemeError
from mneme_cc.replay import outcome as oc
from mneme_cc.replay.config import ReplayConfig

_SPAWN = multiprocessing.get_context("spawn")  # CUDA state must not be forked


@dataclass
class TrialResult:
    outcome: str
    config: ReplayConfig
    median_ms: float | None = None
    samples_ms: list[float] = field(default_factory=list)
    registers: int | None = None
    spill_bytes: int | None = None
    cubin_bytes: int | None = None
    occupancy: float | None = None
    compile_seconds: dict[str, float] = field(default_factory=dict)
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""               # why, for any outcome but verified
    seconds: float = 0.0          # wall time of the trial

    @property
    def verified(self) -> bool:
        """Passed verification: bitwise, or within a nondeterministic spread."""
        return self.outcome in oc.PASSED

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --- work done in other processes ------------------------------------------

_instances: dict[tuple[str, str], Any] = {}


def _instance(db_path: str, name: str):
    from mneme_cc.record import RecordDB

    if (db_path, name) not in _instances:
        _instances[db_path, name] = RecordDB(db_path).find(rid=name)
    return _instances[db_path, name]


def _warm(db_path: str, name: str) -> None:
    """Starts a compile process: imports LLVM and reads the instance once."""
    from mneme_cc.replay.llvm import llvm_binding

    llvm_binding()
    _instance(db_path, name)


def _compile(db_path: str, name: str, config_json: str, arch: str, cache_dir: str | None):
    """Compiles into the disk cache; returns (error or "", compile seconds)."""
    from mneme_cc.replay.compiler import compile_instance

    config = ReplayConfig.from_json(config_json)
    if config.baseline == "original":
        return "", {}
    try:
        compiled = compile_instance(_instance(db_path, name), config, arch, cache_dir)
    except (MnemeError, RuntimeError) as exc:  # llvmlite raises RuntimeError
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__, {}
    return "", compiled.seconds


def _replay_to_dict(result) -> dict[str, Any]:
    r = result.resources
    return {"outcome": result.outcome, "median_ms": result.median_ms,
            "samples_ms": result.samples_ms, "registers": r.registers if r else None,
            "spill_bytes": (r.spill_stores + r.spill_loads) if r else None,
            "cubin_bytes": result.cubin_bytes or None, "occupancy": result.occupancy,
            "mismatches": [dataclasses.asdict(m) for m in result.mismatches],
            "error": result.failure or ""}


def _gpu_main(conn, db_path: str, name: str, ordinal: int, cache_dir: str | None) -> None:
    """A GPU worker: restore the instance once, then replay what arrives."""
    from mneme_cc.replay.device import DeviceError
    from mneme_cc.replay.replayer import Replayer

    try:
        replayer = Replayer(_instance(db_path, name), device=ordinal, cache_dir=cache_dir)
        replayer.open()
    except MnemeError as exc:
        conn.send({"fatal": str(exc)})
        return
    conn.send({"ready": replayer.device.arch})
    while True:
        message = conn.recv()
        if message is None:
            break
        config = ReplayConfig.from_json(message)
        try:
            conn.send(_replay_to_dict(replayer.replay(config)))
        except DeviceError as exc:
            kind = oc.classify_device_error(exc.code)
            conn.send({"outcome": kind, "error": str(exc)})
            if kind == oc.RUNTIME_ERROR:
                os._exit(3)  # the context is lost: a new worker takes over
        except (MnemeError, RuntimeError) as exc:
            conn.send({"outcome": oc.COMPILE_ERROR, "error": str(exc).splitlines()[0]})
    replayer.close()


class _GpuWorker:
    """One worker process on one GPU, restarted when it dies or hangs."""

    def __init__(self, db_path: str, name: str, ordinal: int, cache_dir: str | None,
                 start_timeout: float):
        self.args = (db_path, name, ordinal, cache_dir)
        self.start_timeout = start_timeout
        self.restarts = -1
        self._start()

    def _start(self) -> None:
        self.conn, child = _SPAWN.Pipe()
        self.process = _SPAWN.Process(target=_gpu_main, args=(child, *self.args), daemon=True)
        self.process.start()
        child.close()
        self.restarts += 1
        if not self.conn.poll(self.start_timeout):
            self._kill()
            raise MnemeError(f"GPU {self.args[2]}: the replay worker did not start within "
                             f"{self.start_timeout:.0f} s")
        try:
            hello = self.conn.recv()
        except EOFError:
            raise MnemeError(f"GPU {self.args[2]}: the replay worker died while starting") \
                from None
        if "fatal" in hello:
            raise MnemeError(hello["fatal"])
        self.arch = hello["ready"]

    def _kill(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()

    def _restart(self) -> None:
        self._kill()
        self._start()

    def run(self, config: ReplayConfig, timeout: float) -> dict[str, Any]:
        try:
            self.conn.send(config.to_json())
            if not self.conn.poll(timeout):
                self._restart()
                return {"outcome": oc.TIMEOUT,
                        "error": f"no result within {timeout:g} s: the worker was killed"}
            reply = self.conn.recv()
        except (EOFError, OSError):
            self.process.join(30)
            code = self.process.exitcode
            self._restart()
            return {"outcome": oc.RUNTIME_ERROR,
                    "error": f"the replay worker died (exit status {code})"}
        if reply["outcome"] == oc.RUNTIME_ERROR:
            self.process.join(30)  # it leaves after a fault: its context is lost
            self._restart()
        return reply

    def close(self) -> None:
        try:
            self.conn.send(None)
            self.process.join(10)
        except (BrokenPipeError, OSError):
            pass
        if self.process.is_alive():
            self._kill()


class ReplayExecutor:
    """Compiles in `compile_workers` processes; runs on each of `devices`."""

    def __init__(self, instance, devices=(0,), compile_workers: int | None = None,
                 cache_dir: str | Path | None = None, trial_timeout: float = 60.0,
                 start_timeout: float = 600.0):
        self.db_path, self.name = str(instance.db.path), instance.name
        self.cache_dir = str(cache_dir) if cache_dir else None
        self.trial_timeout = trial_timeout
        workers = compile_workers or os.cpu_count() or 1
        self._pool = ProcessPoolExecutor(workers, mp_context=_SPAWN)
        # Compile processes start while the GPU workers restore the instance,
        # not during the first trials.
        warming = [self._pool.submit(_warm, self.db_path, self.name) for _ in range(workers)]
        self.workers: list[_GpuWorker] = []
        try:
            for d in devices:
                self.workers.append(_GpuWorker(self.db_path, self.name, d, self.cache_dir,
                                               start_timeout))
            for future in warming:
                future.result()
        except BaseException:
            for w in self.workers:
                w.close()
            self._pool.shutdown(cancel_futures=True)
            raise
        self.arch = self.workers[0].arch
        self._queue: queue.Queue = queue.Queue()
        self._threads = [threading.Thread(target=self._serve, args=(w,), daemon=True)
                         for w in self.workers]
        for t in self._threads:
            t.start()

    @property
    def restarts(self) -> int:
        """How many times a GPU worker was replaced (after hangs, faults, crashes)."""
        return sum(w.restarts for w in self.workers)

    def submit(self, config: ReplayConfig) -> Future:
        """A Future of the TrialResult; compilation starts now."""
        future: Future = Future()
        started = time.perf_counter()
        compiling = self._pool.submit(_compile, self.db_path, self.name, config.to_json(),
                                      self.arch, self.cache_dir)

        def compiled(done: Future) -> None:
            try:
                error, seconds = done.result()
            except Exception as exc:  # noqa: BLE001 - a compile process died
                error, seconds = f"the compiler process failed: {exc}", {}
            if error:
                future.set_result(TrialResult(oc.COMPILE_ERROR, config, error=error,
                                              seconds=time.perf_counter() - started))
            else:
                self._queue.put((config, seconds, started, future))

        compiling.add_done_callback(compiled)
        return future

    def evaluate(self, config: ReplayConfig) -> TrialResult:
        return self.submit(config).result()

    def _serve(self, worker: _GpuWorker) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            config, seconds, started, future = item
            try:
                reply = worker.run(config, self.trial_timeout)
            except MnemeError as exc:  # the worker could not be restarted
                reply = {"outcome": oc.RUNTIME_ERROR, "error": str(exc)}
            reply.setdefault("error", "")
            result = TrialResult(config=config, compile_seconds=seconds,
                                 seconds=time.perf_counter() - started, **reply)
            if result.outcome == oc.FAILED_VERIFICATION and result.mismatches:
                first = result.mismatches[0]
                result.error = f"{first['buffer']}: {first['count']} element(s) differ"
            future.set_result(result)

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join()
        for w in self.workers:
            w.close()
        self._pool.shutdown(cancel_futures=True)

    def __enter__(self) -> ReplayExecutor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
