"""`Replayer`: one recorded instance, replayed under ReplayConfigs.

    with Replayer(instance) as r:
        result = r.replay(ReplayConfig(pipeline="default<O2>"))
        result.verified, result.median_ms

The prologue is restored once; before every launch the allocations the
kernel writes are restored device-to-device from a pristine copy, so each
launch sees the recorded input. The first launch of a configuration is
verified against the recorded epilogue and the very same binary is timed.
A failed verification is checked once for nondeterminism
(mneme_cc.replay.nondeterminism), and every result says whether its
configuration keeps the build's numerics (mneme_cc.replay.numerics).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mneme_cc.record.db import ALLOCATION, GLOBAL, Instance
from mneme_cc.replay import device as dev
from mneme_cc.replay import nondeterminism as nd
from mneme_cc.replay import outcome as oc
from mneme_cc.replay.compiler import CompiledKernel, compile_kernel
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.cubin import Resources
from mneme_cc.replay.gpu_compare import GpuComparer
from mneme_cc.replay.jit import KernelLaunch
from mneme_cc.replay.numerics import codegen_of, numerics_changes
from mneme_cc.replay.output import SavedRegion, check_new
from mneme_cc.replay.output import save_output as save_output_dir
from mneme_cc.replay.verify import Mismatch, Policy, compare, policies_for

TIMING_BATCH = 32  # timed launches queued behind the gate at once


@dataclass
class ReplayResult:
    config: ReplayConfig
    verified: bool
    mismatches: list[Mismatch]
    samples_ms: list[float]
    resources: Resources | None
    compile_seconds: dict[str, float] = field(default_factory=dict)
    cache_hit: bool = False
    occupancy: float = 0.0              # theoretical: resident warps / the SM's maximum
    max_threads_per_block: int = 0      # what the compiled kernel allows
    cubin_bytes: int = 0
    # Seconds spent replaying: load (module), restore, launch (first, verified), verify, time.
    replay_seconds: dict[str, float] = field(default_factory=dict)
    compiled: CompiledKernel | None = None  # the IR, PTX and cubin run; None for "original"
    # How the config's numerics differ from the build's (empty: they do not).
    numerics: list[str] = field(default_factory=list)
    # Buffers that differ from the recording only within their nondeterministic spread.
    nondeterministic: list[str] = field(default_factory=list)

    def emit(self, directory) -> list[Path]:
        """Writes what was run (kernel.ll, kernel.ptx, kernel.cubin) into directory."""
        if self.compiled is None:
            return []
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        files = {"kernel.ll": self.compiled.ir, "kernel.ptx": self.compiled.ptx,
                 "kernel.cubin": self.compiled.cubin}
        for name, content in files.items():
            path = directory / name
            path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
        return [directory / name for name in files]

    @property
    def outcome(self) -> str:
        if not self.verified:
            return oc.FAILED_VERIFICATION
        return oc.NONDETERMINISTIC if self.nondeterministic else oc.VERIFIED

    @property
    def failure(self) -> str | None:
        """What a failed verification means, in one line (None when it passed)."""
        if self.verified:
            return None
        if self.numerics:
            return "numerics-changing: " + "; ".join(self.numerics)
        if self.config.pin_contraction:
            return ("pinned contraction: the application's ptxas fused multiply-adds that LLVM "
                    "left (mneme check's pinned column), or a miscompile (mneme bisect)")
        return ("the configuration keeps the build's numerics: a miscompile, a launch the "
                "kernel does not support, or an unexplained difference (mneme bisect)")

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def min_ms(self) -> float:
        return min(self.samples_ms)

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.samples_ms)

    @property
    def stdev_ms(self) -> float:
        return statistics.stdev(self.samples_ms) if len(self.samples_ms) > 1 else 0.0


def compile_instance(inst: Instance, config: ReplayConfig, arch: str,
                     cache_dir=None) -> CompiledKernel:
    """The instance's kernel compiled as `config` says (the "ir" baseline: at the
    recorded settings), through the disk cache."""
    kernel = inst.db.kernel(inst.static_hash)
    codegen = codegen_of(kernel)
    if config.baseline == "ir":
        config = codegen.baseline_config()
    launch = KernelLaunch(inst.kernel_name, inst.grid, inst.block, inst.args,
                          tuple((p["offset"], p["size"]) for p in inst.params))
    ir = kernel.description["ir"]
    return compile_kernel(kernel.bitcode(), ir["content_hash"], launch, config, arch, codegen,
                          cache_dir)


def _buffer_name(region) -> str:
    """How results name a buffer: an allocation by address, a global by name."""
    return f"allocation {region.address:#x}" if region.kind == ALLOCATION else region.name


def _arch_number(arch: str) -> int:
    return int(arch.removeprefix("sm_").rstrip("a"))


class Replayer:
    """A session over one instance. `probe_nondeterminism`: on a failed
    verification, run the application's kernel again to tell nondeterministic
    buffers from wrong ones (once per instance; the finding is stored)."""

    def __init__(self, instance: Instance, device: int = 0, cache_dir=None,
                 probe_nondeterminism: bool = True):
        self.instance = instance
        self.kernel = instance.db.kernel(instance.static_hash)
        self.ordinal = device
        self.cache_dir = cache_dir
        self.probe_nondeterminism = probe_nondeterminism
        self.nondeterminism = nd.load(instance)
        self._types: dict[str, str] | None = None

    def __enter__(self) -> Replayer:
        self.device = dev.Device(self.ordinal)
        try:
            self._open()
        except BaseException:
            self.device.close()
            raise
        return self

    def _open(self) -> None:
        inst = self.instance
        recorded = inst.device["arch"]
        if _arch_number(self.device.arch) < _arch_number(recorded):
            raise dev.DeviceError(f"this GPU is {self.device.arch}, older than the recorded "
                                  f"{recorded}: replay on a GPU at least as new")
        w = inst.window
        self.window = dev.Window(self.device, w["base"], w["size"], w["granularity"])
        self.pristine: list[tuple[int, int, int]] = []  # (address, copy, size)
        try:
            self._restore_prologue()
        except BaseException:
            for _, copy, _ in self.pristine:
                dev._driver().cuMemFree(copy)
            self.window.close()  # unmaps and frees what was mapped
            raise

    def _restore_prologue(self) -> None:
        inst = self.instance
        prologue, epilogue = inst.prologue, inst.epilogue
        self.allocations = prologue.allocations
        for region in self.allocations:
            self.window.map(region.address, region.size)
            dev.copy_to_device(region.address, region.read())
        # A pristine device copy of every allocation the kernel writes.
        drv = dev._driver()
        for region in self.allocations:
            if epilogue.region(region.address, region.kind, region.name).chunks:
                copy = dev.check(drv.cuMemAlloc(region.size), "allocating a pristine copy")
                dev.check(drv.cuMemcpyDtoD(copy, region.address, region.size), "copying")
                self.pristine.append((region.address, int(copy), region.size))
        self.gate = dev.LaunchGate()
        self.params = dev.KernelParams(inst.args, inst.params)
        # Globals are restored before every launch, from device copies, so that
        # restoring never waits on the host (timed launches queue behind a gate).
        self.prologue_globals: list[tuple[str, int, int]] = []  # (name, copy, size)
        for g in prologue.globals:
            copy = int(dev.check(drv.cuMemAlloc(max(g.size, 1)), "allocating a global's copy"))
            self.prologue_globals.append((g.name, copy, g.size))
            dev.copy_to_device(copy, g.read())
        self.timing_events: list[tuple[Any, Any]] = []  # (start, stop) per timed launch
        self.flush = None  # twice the L2, written before a launch when flush_l2 is set
        self._epilogue_cache: dict = {}
        self._expected_dev: dict[int, int] = {}
        self._comparer: GpuComparer | None = None

    def __exit__(self, *exc) -> None:
        drv = dev._driver()
        for _, copy, _ in self.pristine + self.prologue_globals:
            drv.cuMemFree(copy)
        for start, stop in self.timing_events:
            drv.cuEventDestroy(start)
            drv.cuEventDestroy(stop)
        if self.flush:
            drv.cuMemFree(self.flush[0])
        for copy in self._expected_dev.values():
            drv.cuMemFree(copy)
        if self._comparer:
            self._comparer.close()
        self.gate.close()
        self.window.close()
        self.device.close()

    def _load(self, config: ReplayConfig):
        """(module, function, globals: name -> device address, compiled or None)."""
        drv = dev._driver()
        inst, kernel = self.instance, self.kernel
        compiled = None
        if config.baseline == "original":
            image = kernel.image()
            if image is None:
                raise dev.DeviceError(f"{kernel.demangled}: the application's image was not "
                                      "recorded")
            module = dev.check(drv.cuModuleLoadData(image), "loading the application's image")
        else:
            compiled = compile_instance(inst, config, self.device.arch, self.cache_dir)
            module = dev.check(drv.cuModuleLoadData(compiled.cubin), "loading the cubin")
        try:
            function = dev.check(drv.cuModuleGetFunction(module, inst.kernel_name.encode()),
                                 "finding the kernel")
        except BaseException:
            drv.cuModuleUnload(module)
            raise
        globals_ = {}
        for region in inst.prologue.globals:
            err, address, _ = drv.cuModuleGetGlobal(module, region.name.encode())
            if err == drv.CUresult.CUDA_SUCCESS:
                globals_[region.name] = int(address)
        return module, function, globals_, compiled

    def _restore(self, globals_: dict[str, int]) -> None:
        drv = dev._driver()
        for address, copy, size in self.pristine:
            dev.check(drv.cuMemcpyDtoDAsync(address, copy, size, self.device.stream), "restoring")
        for name, copy, size in self.prologue_globals:
            if name in globals_ and size:
                dev.check(drv.cuMemcpyDtoDAsync(globals_[name], copy, size, self.device.stream),
                          "restoring")

    def _flush_l2(self) -> None:
        drv = dev._driver()
        if self.flush is None:
            attr = drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
            size = 2 * dev.check(drv.cuDeviceGetAttribute(attr, self.device.handle), "L2 size")
            self.flush = (int(dev.check(drv.cuMemAlloc(size), "allocating the L2 flush")), size)
        address, size = self.flush
        dev.check(drv.cuMemsetD8Async(address, 0, size, self.device.stream), "flushing L2")

    def _occupancy(self, function, block, smem: int) -> tuple[float, int]:
        drv = dev._driver()
        threads = block[0] * block[1] * block[2]
        blocks = dev.check(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(function, threads, smem),
                           "computing occupancy")
        attr = drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR
        per_sm = dev.check(drv.cuDeviceGetAttribute(attr, self.device.handle), "reading the SM")
        limit = dev.check(drv.cuFuncGetAttribute(
            drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function),
            "reading the kernel's limits")
        warps = -(-threads // 32)
        return min(1.0, blocks * warps / (per_sm // 32)), int(limit)

    def _launch(self, function, grid, block, smem: int, cooperative: bool) -> None:
        drv = dev._driver()
        launch = drv.cuLaunchCooperativeKernel if cooperative else drv.cuLaunchKernel
        extra = () if cooperative else (0,)
        dev.check(launch(function, *grid, *block, smem, self.device.stream, self.params.address,
                         *extra), "launching the kernel")

    def _expected(self, region) -> np.ndarray:
        """The recorded epilogue of a region, read (and decompressed) once."""
        key = (region.kind, region.name, region.address)
        if key not in self._epilogue_cache:
            self._epilogue_cache[key] = region.read()
        return self._epilogue_cache[key]

    def _expected_on_device(self, region) -> int:
        """A device copy of a region's recorded epilogue, made on first use."""
        if region.address not in self._expected_dev:
            drv = dev._driver()
            copy = int(dev.check(drv.cuMemAlloc(max(region.size, 1)), "allocating"))
            dev.copy_to_device(copy, self._expected(region))
            self._expected_dev[region.address] = copy
        return self._expected_dev[region.address]

    def _policies(self, config: ReplayConfig) -> tuple[dict[str, Policy], set[str]]:
        """Buffer name -> policy: the config's, over those derived from a
        nondeterministic spread; and the names whose policy is derived."""
        inst = self.instance
        given = policies_for(config.verify, inst.params, inst.args, inst.epilogue.allocations)
        derived = self.nondeterminism.policies() if self.nondeterminism else {}
        derived = {name: Policy.parse(spec, name) for name, spec in derived.items()
                   if name not in given}
        return {**derived, **given}, set(derived)

    def _verify(self, globals_: dict[str, int],
                config: ReplayConfig) -> tuple[list[Mismatch], list[str]]:
        """Every allocation compared on the device; only differing ones come to the
        host. Returns the mismatches and the buffers that differ bitwise but
        within their nondeterministic spread."""
        inst = self.instance
        epilogue = inst.epilogue
        policies, derived = self._policies(config)
        if self._comparer is None:
            self._comparer = GpuComparer(self.device)
        out, tolerated = [], []
        written = {address for address, _, _ in self.pristine}
        for region in epilogue.allocations:
            name = _buffer_name(region)
            count, _ = self._comparer.differing(region.address, self._expected_on_device(region),
                                                region.size)
            if not count:
                continue
            got = dev.copy_from_device(region.address, region.size)
            out.append(compare(name, region.address, got, self._expected(region),
                               policies.get(name), self._element_types().get(name)))
            if out[-1] is None and name in derived:
                tolerated.append(name)
            if region.address not in written:  # the recording never wrote it: put it back
                dev.copy_to_device(region.address,
                                   inst.prologue.region(region.address, region.kind).read())
        for region in epilogue.globals:
            if region.name in globals_:
                got = dev.copy_from_device(globals_[region.name], region.size)
                expected = self._expected(region)
                out.append(compare(region.name, globals_[region.name], got, expected,
                                   policies.get(region.name)))
                if out[-1] is None and region.name in derived and (got != expected).any():
                    tolerated.append(region.name)
        return [m for m in out if m is not None], tolerated

    def _element_types(self) -> dict[str, str]:
        """Buffer name -> element type where the IR tells (read when something differs)."""
        if self._types is None:
            from mneme_cc.replay.dtypes import buffer_dtypes

            self._types = buffer_dtypes(self.instance) if self.kernel.has_ir else {}
        return self._types

    def _probe(self) -> nd.Nondeterminism:
        """Runs the application's kernel (the IR at the recorded settings without
        its image) again from the prologue and compares the runs."""
        inst = self.instance
        reference = "original" if self.kernel.description.get("image") else "ir"
        module, function, globals_, _ = self._load(ReplayConfig(baseline=reference))
        runs: list[dict[str, np.ndarray]] = []
        try:
            self._allow_shared_memory(function, inst.shared_mem_bytes)
            for _ in range(nd.RUNS):
                self._restore(globals_)
                self._launch(function, inst.grid, inst.block, inst.shared_mem_bytes,
                             inst.cooperative)
                dev.check(dev._driver().cuStreamSynchronize(self.device.stream),
                          "running the application's kernel")
                runs.append({_buffer_name(r): r.data for r in self._output_regions(globals_)})
                self._verify(globals_, ReplayConfig())  # puts back what must not change
        finally:
            dev._driver().cuModuleUnload(module)
        buffers, unreproduced = [], []
        for region in inst.epilogue.regions:
            name = _buffer_name(region)
            outputs = [run[name] for run in runs if name in run]
            if len(outputs) != nd.RUNS:
                continue
            found = nd.spread(name, self._expected(region), outputs,
                              self._element_types().get(name))
            if found:
                buffers.append(found)
            elif (outputs[0] != self._expected(region)).any():
                unreproduced.append(name)
        return nd.Nondeterminism(reference, nd.RUNS, buffers, unreproduced)

    def _probed(self) -> bool:
        """After a failed verification: whether a probe just found nondeterminism
        (once per instance; a probe that cannot run leaves the failure as it is)."""
        if not self.probe_nondeterminism or self.nondeterminism is not None:
            return False
        from mneme_cc.errors import MnemeError

        try:
            self.nondeterminism = self._probe()
        except MnemeError:
            self.probe_nondeterminism = False
            return False
        try:
            nd.store(self.instance, self.nondeterminism)
        except OSError:
            pass  # a read-only database: the finding holds for this session
        return not self.nondeterminism.deterministic

    def _allow_shared_memory(self, function, smem: int) -> None:
        if smem > 48 * 1024:
            drv = dev._driver()
            attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            dev.check(drv.cuFuncSetAttribute(function, attr, smem), "allowing shared memory")

    def _events(self, count: int) -> list[tuple[Any, Any]]:
        drv = dev._driver()
        while len(self.timing_events) < count:
            self.timing_events.append((dev.check(drv.cuEventCreate(0), "creating an event"),
                                       dev.check(drv.cuEventCreate(0), "creating an event")))
        return self.timing_events[:count]

    def _time(self, function, grid, block, smem: int, globals_: dict[str, int],
              config: ReplayConfig) -> list[float]:
        """Milliseconds of each timed launch, warm-up launches dropped.

        Launches are queued in batches behind the gate (restore, flush, start
        event, launch, stop event, ...) and the gate opened once per batch:
        the GPU runs them back to back while each event pair brackets one
        kernel alone, and the host waits once per batch, not once per launch.
        A batch stays well under the depth at which queuing would block.
        """
        drv = dev._driver()
        stream = self.device.stream
        cooperative = self.instance.cooperative
        samples: list[float] = []
        if config.flush_l2:
            self._flush_l2()  # allocates its buffer now, not while the stream is held
        total = config.warmup + config.iterations
        for first in range(0, total, TIMING_BATCH):
            batch = self._events(min(TIMING_BATCH, total - first))
            self.gate.hold(stream)
            try:
                for start, stop in batch:
                    self._restore(globals_)
                    if config.flush_l2:
                        self._flush_l2()
                    dev.check(drv.cuEventRecord(start, stream), "timing")
                    self._launch(function, grid, block, smem, cooperative)
                    dev.check(drv.cuEventRecord(stop, stream), "timing")
            finally:
                self.gate.open()
            dev.check(drv.cuEventSynchronize(batch[-1][1]), "running the kernel")
            for i, (start, stop) in enumerate(batch, first):
                if i >= config.warmup:
                    samples.append(float(dev.check(drv.cuEventElapsedTime(start, stop),
                                                   "timing")))
        return samples

    def _output_regions(self, globals_: dict[str, int]) -> list[SavedRegion]:
        """The device state the recorded epilogue covers, read back now."""
        out = []
        for region in self.instance.epilogue.regions:
            if region.kind == ALLOCATION:
                address = region.address
            elif region.kind == GLOBAL and region.name in globals_:
                address = globals_[region.name]
            else:
                continue
            out.append(SavedRegion(region.kind, region.name, region.address,
                                   dev.copy_from_device(address, region.size)))
        return out

    def replay(self, config: ReplayConfig | None = None,
               save_output: str | Path | None = None) -> ReplayResult:
        """Compiles (or loads) as config says, runs once and verifies against
        the recorded epilogue, then times. `save_output`: a new directory for
        the device state after that first launch (mneme_cc.replay.output)."""
        config = config or ReplayConfig()
        if save_output:
            check_new(save_output)  # before the work, not after
        drv = dev._driver()
        inst = self.instance
        clock = time.perf_counter()
        spent: dict[str, float] = {}

        def lap(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            spent[name] = spent.get(name, 0.0) + now - clock
            clock = now

        module, function, globals_, compiled = self._load(config)
        if compiled:
            spent["compile"] = sum(compiled.seconds.values())
            clock += spent["compile"]
        lap("load")
        # Each configuration loads a module; a long study would pile them up.
        try:
            grid = config.grid or inst.grid
            block = config.block or inst.block
            smem = inst.shared_mem_bytes if config.shared_mem_bytes is None else config.shared_mem_bytes
            self._allow_shared_memory(function, smem)
            stream = self.device.stream
            # Verify the first launch; time the same binary afterwards.
            self._restore(globals_)
            dev.check(drv.cuStreamSynchronize(stream), "restoring")
            lap("restore")
            self._launch(function, grid, block, smem, inst.cooperative)
            dev.check(drv.cuStreamSynchronize(stream), "running the kernel")
            lap("launch")
            # Read before verifying: verification puts back what should not have changed.
            saved = self._output_regions(globals_) if save_output else None
            mismatches, tolerated = self._verify(globals_, config)
            if mismatches and self._probed():
                # Verified again, under the spread now; this attempt's time counts too.
                again = self.replay(config, save_output)
                if compiled:
                    again.compile_seconds, again.cache_hit = compiled.seconds, compiled.cache_hit
                for phase, seconds in spent.items():
                    again.replay_seconds[phase] = again.replay_seconds.get(phase, 0.0) + seconds
                return again
            outcome = (oc.FAILED_VERIFICATION if mismatches else
                       oc.NONDETERMINISTIC if tolerated else oc.VERIFIED)
            if saved is not None:
                save_output_dir(Path(save_output), inst, saved, {
                    "config": config.to_dict(), "outcome": outcome})
            lap("verify")
            samples = self._time(function, grid, block, smem, globals_, config)
            lap("time")
            occupancy, limit = self._occupancy(function, block, smem)
            return ReplayResult(config, not mismatches, mismatches, samples,
                                compiled.resources if compiled else None,
                                compiled.seconds if compiled else {},
                                compiled.cache_hit if compiled else False,
                                occupancy, limit, len(compiled.cubin) if compiled else 0, spent,
                                compiled, numerics_changes(config, codegen_of(self.kernel))
                                if self.kernel.has_ir else [], tolerated)
        finally:
            drv.cuModuleUnload(module)  # unchecked: after a kernel fault it cannot succeed
