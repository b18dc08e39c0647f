"""The executor's worker processes: compile processes (LLVM and ptxas, one
configuration at a time) and one replay process per GPU. Each is a spawned
process behind a pipe, so that a hang, a crash or the study's deadline is
answered by killing it and, while the executor runs on, starting a fresh one.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from mneme_cc.errors import MnemeError
from mneme_cc.replay import outcome as oc
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.judging import contraction_probe as probe

_SPAWN = multiprocessing.get_context("spawn")  # CUDA state must not be forked

_instances: dict[tuple[str, str], Any] = {}


def _instance(db_path: str, name: str):
    from mneme_cc.record import RecordDB

    if (db_path, name) not in _instances:
        _instances[db_path, name] = RecordDB(db_path).find(rid=name)
    return _instances[db_path, name]


def _messages(conn) -> Iterator[Any]:
    """What the executor sends, until it says stop (None) or is gone."""
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        yield message


def _inbox(conn) -> Iterator[Any]:
    """What the executor sends, as _messages(), read on a thread of its own
    as it arrives: the executor may send the next trial (with its kernel's
    bytes, more than a pipe holds) while this process replays one, and must
    never block on a pipe nobody reads while it waits for that answer."""
    arrived: queue.SimpleQueue = queue.SimpleQueue()

    def read() -> None:
        try:
            for message in _messages(conn):
                arrived.put(message)
        except OSError:
            pass  # the executor's end is gone: this process ends too
        finally:
            arrived.put(None)

    threading.Thread(target=read, daemon=True).start()
    while (message := arrived.get()) is not None:
        yield message


def _compile_main(conn, db_path: str, name: str, cache_dir: str | None) -> None:
    """A compile process: imports LLVM and reads the instance once, then
    compiles into the disk cache what arrives; answers (error or "", seconds)
    and, for a kernel it built, the kernel: its cubin and resources, which
    the GPU worker then loads as they are.
    Asked for `probe_variants`, it compiles instead what the contraction
    probe would run if the configuration failed (nothing where the probe
    does not apply), so that such a failure's probe finds it compiled."""
    from mneme_cc.replay.compiling.compiler import compile_instance
    from mneme_cc.replay.compiling.llvm import llvm_binding
    from mneme_cc.replay.compiling.numerics import codegen_of

    try:
        llvm_binding()
        inst = _instance(db_path, name)
    except MnemeError as exc:
        conn.send({"fatal": str(exc)})
        return
    conn.send({"ready": True})
    for message in _messages(conn):
        config_json, arch, probe_variants = message
        config = ReplayConfig.from_json(config_json)
        if config.baseline == "original":
            conn.send(("", {}))
            continue
        try:
            if not probe_variants:
                compiled = compile_instance(inst, config, arch, cache_dir)
                conn.send(("", compiled.seconds, {
                    "cubin": compiled.cubin, "resources": dataclasses.asdict(compiled.resources),
                    "cache_hit": compiled.cache_hit, "assembler": compiled.assembler}))
                continue
            kernel = inst.db.kernel(inst.static_hash)
            codegen = codegen_of(kernel) if kernel.has_ir else None
            variants = (probe.reference(codegen), probe.without_contraction(config)) \
                if codegen and probe.applies(config, codegen) else ()
            seconds = sum(sum(compile_instance(inst, variant, arch, cache_dir).seconds.values())
                          for variant in variants)
            conn.send(("", {"probe": seconds} if variants else {}))
        except Exception as exc:  # noqa: BLE001 - LLVM, ptxas, a full cache disk: one line
            conn.send((str(exc).splitlines()[0] if str(exc) else type(exc).__name__, {}))


def _verdict(outcome: str, numerics: list[str]) -> str:
    """A failure the contraction probe explained is a numerics change, not a miscompile."""
    return oc.NUMERICS_CHANGING if outcome == oc.FAILED_VERIFICATION and \
        probe.REASON in numerics else outcome


def _replay_to_dict(result, race: float | None = None) -> dict[str, Any]:
    r = result.resources
    outcome = _verdict(result.outcome, result.numerics)
    samples = result.samples_ms
    return {"outcome": outcome, "median_ms": result.median_ms if samples else None,
            "samples_ms": result.samples_ms, "registers": r.registers if r else None,
            "spill_bytes": (r.spill_stores + r.spill_loads) if r else None,
            "cubin_bytes": result.cubin_bytes or None, "occupancy": result.occupancy,
            "mismatches": [dataclasses.asdict(m) for m in result.mismatches],
            "replay_seconds": dict(result.replay_seconds), "error": result.failure or "",
            # Stopped early for being slower than `race` (LaunchTimer), not settled.
            "raced": 0 < len(samples) < result.config.iterations and race is not None
                     and min(samples) > race,
            "probe_pending": result.probe_pending}


def _probe_to_dict(replayer, config: ReplayConfig) -> dict[str, Any]:
    """The contraction probe of a failure whose probe was left pending."""
    from mneme_cc.replay.result import numerics_failure

    began = time.perf_counter()
    numerics = replayer.probe(config)
    outcome = _verdict(oc.FAILED_VERIFICATION, numerics)
    return {"outcome": outcome, "replay_seconds": {"probe": time.perf_counter() - began},
            "error": numerics_failure(numerics) if outcome == oc.NUMERICS_CHANGING else ""}


def _gpu_main(conn, db_path: str, name: str, cache_dir: str | None, ordinal: int) -> None:
    """A GPU worker: restore the instance once, then replay what arrives. A
    contraction probe whose variants are not compiled yet is not compiled
    here, where the GPU would wait: the failure comes back pending, and the
    probe alone is sent again once a compile process has compiled them."""
    from mneme_cc.replay.compiling.compiler import CompiledKernel
    from mneme_cc.replay.compiling.cubin import Resources
    from mneme_cc.replay.running.device import DeviceError
    from mneme_cc.replay.running.replayer import Replayer

    try:
        # A study has no use for the time of a wrong result, nor for its measures.
        replayer = Replayer(_instance(db_path, name), device=ordinal, cache_dir=cache_dir,
                            brief_failures=True, compile_probes=False)
        replayer.open()
        replayer.prepare_verification()  # while the other workers start
    except MnemeError as exc:
        conn.send({"fatal": str(exc)})
        return
    conn.send({"ready": replayer.device.arch})
    for message in _inbox(conn):
        config_json, stop_above_ms, kernel, probe_only = message
        config = ReplayConfig.from_json(config_json)
        try:
            if probe_only:
                conn.send(_probe_to_dict(replayer, config))
                continue
            compiled = None if kernel is None else CompiledKernel(
                kernel["cubin"], "", Resources(**kernel["resources"]), {},
                kernel["cache_hit"], ir_text="", assembler=kernel["assembler"])
            conn.send(_replay_to_dict(replayer.replay(config, stop_above_ms=stop_above_ms,
                                                      compiled=compiled), stop_above_ms))
        except DeviceError as exc:
            kind = oc.classify_device_error(exc.code)
            conn.send({"outcome": kind, "error": str(exc)})
            if kind == oc.RUNTIME_ERROR:
                os._exit(3)  # the context is lost: a new worker takes over
        except (MnemeError, RuntimeError) as exc:
            conn.send({"outcome": oc.COMPILE_ERROR, "error": str(exc).splitlines()[0]})
        except Exception as exc:  # noqa: BLE001 - anything else: said, and this worker replaced
            conn.send({"outcome": oc.RUNTIME_ERROR,
                       "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"})
    replayer.close()


class Worker:
    """One worker process, restarted when it dies or hangs; `cancel()` kills
    it for good (the executor's deadline)."""

    target = staticmethod(_compile_main)
    what = "compile process"

    def __init__(self, db_path: str, name: str, cache_dir: str | None, *extra,
                 start_timeout: float = 600.0, wait: bool = True):
        """Starts the process; with wait=False, ready() waits for it to be ready
        (so that many start at once)."""
        self.args = (db_path, name, cache_dir, *extra)
        self.start_timeout = start_timeout
        self.restarts = -1
        self.cancelled = False
        self.closed = False
        # Held by the thread using the process: only that thread closes its pipe
        # (a pipe closed under another thread's feet can close a reused fd).
        self.lock = threading.Lock()
        # Guards `cancelled` against a process being started at that moment.
        self._state = threading.Lock()
        self.process: Any = None
        self.hello: Any = None
        self.launched = self.start_seconds = 0.0
        self._launch()
        if wait:
            self.ready()

    def _launch(self) -> None:
        conn, child = _SPAWN.Pipe()
        process = _SPAWN.Process(target=self.target, args=(child, *self.args), daemon=True)
        with self._state:
            if self.cancelled:
                conn.close()
                child.close()
                raise MnemeError(f"{self.label}: cancelled")
            process.start()
            self.conn, self.process = conn, process
            self.launched = time.perf_counter()
        child.close()
        self.restarts += 1

    def ready(self, timeout: float | None = None) -> None:
        """Waits for the process's hello (start_timeout, or `timeout` seconds)."""
        if not self.conn.poll(self.start_timeout if timeout is None else timeout):
            self._kill()
            raise MnemeError(f"{self.label}: did not start within {self.start_timeout:.0f} s")
        try:
            hello = self.conn.recv()
        except (EOFError, OSError):
            raise MnemeError(f"{self.label}: died while starting") from None
        if "fatal" in hello:
            raise MnemeError(hello["fatal"])
        self.hello = hello["ready"]
        self.start_seconds = time.perf_counter() - self.launched  # its latest start

    @property
    def label(self) -> str:
        return f"the {self.what}"

    def _kill(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()

    def _restart(self) -> str | None:
        """Replaces the process (unless cancelled); why it could not, or None."""
        self._kill()
        if self.cancelled:
            return None
        try:
            self._launch()
            self.ready()
        except MnemeError as exc:
            return str(exc)
        return None

    def send(self, message: Any) -> None:
        """Sends without waiting for the answer, which receive() reads; a
        worker may hold a second message while it works on the first. A
        process that is gone is found so by receive()."""
        with self.lock:
            if self.closed:
                return
            try:
                self.conn.send(message)
            except OSError:
                pass

    def receive(self, timeout: float,
                restart_if: Callable[[Any], bool] | None = None) -> tuple[str, Any]:
        """The answer to the oldest message sent: ("reply", answer),
        ("timeout", None) or ("died", exit status or why); a worker that timed
        out, died or gave a reply `restart_if` names is replaced (unless
        cancelled), and the messages it held are lost. Never raises for the
        worker's sake."""
        with self.lock:
            if self.closed:
                return "died", "closed"
            try:
                if not self.conn.poll(timeout):
                    self._restart()
                    return "timeout", None
                reply = self.conn.recv()
            except (EOFError, OSError):
                self.process.join(30)
                code = self.process.exitcode
                self._restart()
                return "died", code
            if restart_if is not None and restart_if(reply):
                self._restart()
            return "reply", reply

    def ask(self, message: Any, timeout: float,
            restart_if: Callable[[Any], bool] | None = None) -> tuple[str, Any]:
        """send() then receive()."""
        self.send(message)
        return self.receive(timeout, restart_if)

    def cancel(self) -> None:
        """Kills the process: an ask() in progress returns at once."""
        with self._state:
            self.cancelled = True
            if self.process is not None:
                self.process.kill()

    def close(self) -> None:
        if not self.lock.acquire(blocking=not self.cancelled):
            return  # cancelled mid-ask: the asking thread ends it
        try:
            if self.closed:
                return
            self.closed = True
            if self.cancelled:
                # Killed already; its exit (a GPU context's teardown) is not waited for.
                self.process.join(1.0)
                self.conn.close()
                return
            try:
                self.conn.send(None)
                self.process.join(10)
            except (BrokenPipeError, OSError):
                pass
            if self.process.is_alive() or not self.conn.closed:
                self._kill()
        finally:
            self.lock.release()


def ready_all(workers: list[Worker]) -> None:
    """Waits for workers started with wait=False, in the order they answer:
    the first that cannot start raises at once, not after the others' starts
    (a GPU worker's restore takes seconds)."""
    from multiprocessing.connection import wait as answered

    waiting = {worker.conn: worker for worker in workers}
    deadline = time.monotonic() + max((w.start_timeout for w in workers), default=0)
    while waiting:
        ready = answered(list(waiting), timeout=max(0.0, deadline - time.monotonic()))
        for conn in ready or list(waiting)[:1]:  # none in time: the first says so
            waiting.pop(conn).ready(timeout=0)


class GpuWorker(Worker):
    """The replay worker of one GPU."""

    target = staticmethod(_gpu_main)
    what = "replay worker"

    @property
    def label(self) -> str:
        return f"GPU {self.args[3]}: the {self.what}"

    @property
    def arch(self) -> str:
        return self.hello
