"""`Replayer`: one recorded instance, replayed under ReplayConfigs.

    with Replayer(instance) as r:
        result = r.replay(ReplayConfig(pipeline="default<O2>"))
        result.verified, result.median_ms

`open()` takes the GPU and restores the prologue once (DeviceState);
before every launch the allocations the kernel writes are restored
device-to-device from a pristine copy, so each launch sees the recorded
input. The first launch of a configuration is verified against the recorded
epilogue and the very same binary is timed (LaunchTimer). A failed
verification is checked once for nondeterminism
(mneme_cc.replay.judging.nondeterminism), and every result says whether its
configuration keeps the build's numerics (mneme_cc.replay.compiling.numerics),
a failure of one the rules cannot judge after a contraction probe
(mneme_cc.replay.judging.contraction_probe).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from mneme_cc.record.db import Instance
from mneme_cc.record.snapshot import ALLOCATION, GLOBAL
from mneme_cc.replay import outcome as oc
from mneme_cc.replay.compiling.compiler import CompiledKernel, NotCompiled, compile_instance
from mneme_cc.replay.compiling.numerics import codegen_of, numerics_changes
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.judging import nondeterminism as nd
from mneme_cc.replay.judging.gpu_compare import GpuComparer
from mneme_cc.replay.judging.verify import Mismatch, Policy, compare, policies_for
from mneme_cc.replay.output import check_new
from mneme_cc.replay.output import save_output as save_output_dir
from mneme_cc.replay.result import ReplayResult
from mneme_cc.replay.running import device as dev
from mneme_cc.replay.running.device_state import DeviceState
from mneme_cc.replay.running.probes import KeptOutputs, Probes, buffer_name
from mneme_cc.replay.running.timer import LaunchTimer

__all__ = ["Replayer", "ReplayResult"]


def _arch_number(arch: str) -> int:
    return int(arch.removeprefix("sm_").rstrip("a"))


class Replayer(Probes):
    """A session over one instance. `probe_nondeterminism`: on a failed
    verification, run the application's kernel again to tell nondeterministic
    buffers from wrong ones (once per instance; the finding is stored).
    `brief_failures`: a configuration (not a baseline) that fails
    verification is not timed, and a buffer verified bit for bit that
    differs is told by its differing bytes and the first one's offset,
    counted on the device, not measured on the host (what a study keeps;
    `mneme diff` measures). `compile_probes` off: a contraction probe whose
    variants the compile cache does not hold yet is left pending
    (`ReplayResult.probe_pending`) for `probe()` to run once they are
    compiled elsewhere, rather than compiled here (a study's GPU worker).

    `open()` takes the GPU, `close()` gives everything back; `with` does both.
    """

    def __init__(self, instance: Instance, device: int = 0, cache_dir=None,
                 probe_nondeterminism: bool = True, brief_failures: bool = False,
                 compile_probes: bool = True):
        self.instance = instance
        self.kernel = instance.db.kernel(instance.static_hash)
        self.ordinal = device
        self.cache_dir = cache_dir
        self.probe_nondeterminism = probe_nondeterminism
        self.brief_failures = brief_failures
        self.compile_probes = compile_probes
        self.nondeterminism = nd.load(instance)
        self.params = dev.KernelParams(instance.args, instance.params)
        self.state: DeviceState | None = None
        self._comparer: GpuComparer | None = None
        self._types: dict[str, str] | None = None
        self._artifacts_checked: set[str] = set()
        self._unfused_reference: KeptOutputs | None = None  # the contraction probe's, on the device

    # -- the session ---------------------------------------------------------

    def open(self) -> None:
        """Takes the GPU: reserves the recorded window and restores the prologue.

        Raises DeviceError when the GPU, its driver or the window cannot be had."""
        with contextlib.ExitStack() as opened:  # closes what was opened if a step fails
            device = dev.Device(self.ordinal)
            opened.callback(device.close)
            recorded = self.instance.device["arch"]
            if _arch_number(device.arch) < _arch_number(recorded):
                raise dev.DeviceError(f"this GPU is {device.arch}, older than the recorded "
                                      f"{recorded}: replay on a GPU at least as new")
            state = DeviceState(device, self.instance)
            opened.callback(state.close)
            timer = LaunchTimer(device)  # after the window is reserved
            opened.pop_all()
        self.device, self.state, self.timer = device, state, timer

    def prepare_verification(self) -> None:
        """Reads the recorded epilogue (each chunk checked, as preflight()
        checks it) and makes its device copies and the comparer now, not in
        the first replay's verification: a tuning study's GPU worker does it
        as it starts, beside the other GPUs' workers, where otherwise each
        paid it in turn during the study's first replays."""
        epilogue, expected = self.instance.epilogue, self.state.expected
        for region in epilogue.allocations:  # each read checks its chunks
            expected.on_device(region)
        for region in epilogue.globals:
            expected.host(region)
        self._check_chunks(r for r in epilogue.regions if r.kind not in (ALLOCATION, GLOBAL))
        self._artifacts_checked.add("epilogue")
        self.comparer  # noqa: B018 - made now

    def close(self) -> None:
        """Frees what open() and the replays took, and gives the GPU back."""
        if self.state is None:
            return
        if self._comparer:
            self._comparer.close()
            self._comparer = None
        if self._unfused_reference:
            self._unfused_reference.close()
            self._unfused_reference = None
        self.timer.close()
        self.state.close()
        self.state = None
        self.device.close()

    def __enter__(self) -> Replayer:
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def preflight(self, config: ReplayConfig, save_output: str | Path | None = None) -> None:
        """The checks that need no GPU, so that a mistake or a damaged record is
        reported before any GPU work: the pipeline, `save_output` a new
        directory, the verification policies, then the kernel's code and the
        epilogue's chunks (the prologue's are checked as open() restores
        them, before any kernel runs; the record's files once per session).

        replay() runs it; call it before open() to check before the GPU is taken."""
        inst = self.instance
        if config.baseline is None:
            from mneme_cc.replay.compiling.llvm import pipeline_of

            pipeline_of(config.pipeline)
        if save_output:
            check_new(save_output)
        policies_for(config.verify, inst.params, inst.args, inst.prologue.allocations)
        code = "image" if config.baseline == "original" or not self.kernel.has_ir else "bitcode"
        if code not in self._artifacts_checked:
            self.kernel.image() if code == "image" else self.kernel.bitcode()
            self._artifacts_checked.add(code)
        if "epilogue" not in self._artifacts_checked:
            self._check_chunks(inst.epilogue.regions)
            self._artifacts_checked.add("epilogue")

    def _check_chunks(self, regions) -> None:
        """Reads each region's chunks back, checked (a damaged one raises)."""
        for region in regions:
            for digest in region.chunks.values():
                self.instance.db.read_chunk(digest)

    # -- one kernel on the device ---------------------------------------------

    def _load(self, config: ReplayConfig, compiled: CompiledKernel | None = None,
              cached_only: bool = False):
        """(module, function, globals: name -> device address, compiled or None);
        `compiled`: the config's kernel, built already; `cached_only`: raise
        NotCompiled rather than compile it here."""
        inst, kernel = self.instance, self.kernel
        if config.baseline == "original":
            compiled = None
            image = kernel.image()
            if image is None:
                raise dev.DeviceError(f"{kernel.demangled}: the application's image was not "
                                      "recorded")
            module = self.device.load_module(image, "loading the application's image")
        else:
            compiled = compiled or compile_instance(inst, config, self.device.arch, self.cache_dir,
                                                    cached_only)
            module = self.device.load_module(compiled.cubin, "loading the cubin")
        try:
            function = module.function(inst.kernel_name, "finding the kernel")
        except BaseException:
            module.unload()
            raise
        globals_ = {}
        for region in inst.prologue.globals:
            address = module.global_address(region.name)
            if address is not None:
                globals_[region.name] = address
        return module, function, globals_, compiled

    def _allow_shared_memory(self, function, smem: int) -> None:
        if smem > 48 * 1024:
            self.device.allow_shared_memory(function, smem)

    def _launch(self, function, grid, block, smem: int) -> None:
        self.device.launch(function, grid, block, smem, self.params.address,
                           cooperative=self.instance.cooperative)

    def _occupancy(self, function, block, smem: int) -> tuple[float, int]:
        threads = block[0] * block[1] * block[2]
        blocks = self.device.occupancy(function, threads, smem)
        per_sm = self.device.attribute("max_threads_per_multiprocessor", "reading the SM")
        limit = self.device.max_threads_per_block(function)
        warps = -(-threads // 32)
        return min(1.0, blocks * warps / (per_sm // 32)), limit

    def _numerics_changes(self, config: ReplayConfig) -> list[str]:
        if self.kernel.has_ir:
            return numerics_changes(config, codegen_of(self.kernel))
        if config.baseline is not None:
            return []
        from mneme_cc.replay.compiling import ptx_kernel

        return ptx_kernel.numerics_changes(config)

    # -- verification ----------------------------------------------------------

    def _policies(self, config: ReplayConfig) -> tuple[dict[str, Policy], set[str]]:
        """Buffer name -> policy: the config's, over those derived from a
        nondeterministic spread; and the names whose policy is derived."""
        inst = self.instance
        given = policies_for(config.verify, inst.params, inst.args, inst.epilogue.allocations)
        derived = self.nondeterminism.policies() if self.nondeterminism else {}
        derived = {name: Policy.parse(spec, name) for name, spec in derived.items()
                   if name not in given}
        return {**derived, **given}, set(derived)

    @property
    def comparer(self) -> GpuComparer:
        """The session's device comparer, made on first use."""
        if self._comparer is None:
            self._comparer = GpuComparer(self.device)
        return self._comparer

    def _differing(self, allocations):
        """(region, differing bytes, the first's offset) for those of the
        recorded epilogue's `allocations` whose device contents differ from
        it now (compared on the device)."""
        expected = self.state.expected
        allocations = list(allocations)
        found = self.comparer.differing_all([(r.address, expected.on_device(r), r.size)
                                             for r in allocations])
        for region, (count, first) in zip(allocations, found, strict=True):
            if count:
                yield region, count, first

    def _verify(self, globals_: dict[str, int],
                config: ReplayConfig) -> tuple[list[Mismatch], list[str]]:
        """Every allocation compared on the device; only differing ones come to the
        host. Returns the mismatches and the buffers that differ bitwise but
        within their nondeterministic spread."""
        epilogue, state = self.instance.epilogue, self.state
        expected = state.expected
        policies, derived = self._policies(config)
        out, tolerated = [], []
        written = state.written_addresses
        for region, count, first in self._differing(epilogue.allocations):
            name = buffer_name(region)
            if self.brief_failures and name not in policies:
                # Bitwise: the device's count is the verdict; nothing comes to the host.
                out.append(Mismatch(name, region.address, count, [first],
                                    stats={"unit": "byte", "bytes_differing": count,
                                           "size": region.size}))
            else:
                got = dev.copy_from_device(region.address, region.size)
                out.append(compare(name, region.address, got, expected.host(region),
                                   policies.get(name), self._element_types().get(name)))
            if out[-1] is None and name in derived:
                tolerated.append(name)
            if region.address not in written:  # the recording never wrote it: put it back
                state.put_back(region)
        for region in epilogue.globals:
            if region.name in globals_:
                got = dev.copy_from_device(globals_[region.name], region.size)
                recorded = expected.host(region)
                out.append(compare(region.name, globals_[region.name], got, recorded,
                                   policies.get(region.name)))
                if out[-1] is None and region.name in derived and (got != recorded).any():
                    tolerated.append(region.name)
        return [m for m in out if m is not None], tolerated

    def _element_types(self) -> dict[str, str]:
        """Buffer name -> element type where the IR tells (read when something differs)."""
        if self._types is None:
            from mneme_cc.replay.judging.dtypes import buffer_dtypes

            self._types = buffer_dtypes(self.instance) if self.kernel.has_ir else {}
        return self._types

    # -- a replay ---------------------------------------------------------------

    def replay(self, config: ReplayConfig | None = None,
               save_output: str | Path | None = None,
               stop_above_ms: float | None = None,
               compiled: CompiledKernel | None = None) -> ReplayResult:
        """Compiles (or loads) as config says, runs once and verifies against
        the recorded epilogue, then times. `save_output`: a new directory for
        the device state after that first launch (mneme_cc.replay.output).
        `stop_above_ms`: a time to beat, which races the timing and lets it settle
        (LaunchTimer).
        `compiled`: the config's kernel where it was built already (a study's
        compile process built it), not looked up in the compile cache.

        Raises what preflight() raises, DeviceError when the GPU refuses or the
        kernel faults, and what compiling raises."""
        config = config or ReplayConfig()
        self.preflight(config, save_output)  # before the work, not after
        inst = self.instance
        clock = time.perf_counter()
        spent: dict[str, float] = {}

        def lap(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            spent[name] = spent.get(name, 0.0) + now - clock
            clock = now

        module, function, globals_, compiled = self._load(config, compiled)
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
            # Verify the first launch; time the same binary afterwards.
            self.state.restore(globals_)
            self.device.synchronize("restoring")
            lap("restore")
            self._launch(function, grid, block, smem)
            self.device.synchronize("running the kernel")
            lap("launch")
            # Read before verifying: verification puts back what should not have changed.
            saved = self.state.output_regions(globals_) if save_output else None
            mismatches, tolerated = self._verify(globals_, config)
            if mismatches and self._probed():
                # Verified again, under the spread now; this attempt's time counts too.
                again = self.replay(config, save_output, stop_above_ms, compiled)
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
            # A baseline is timed whatever it computes: the study sizes its timing by it.
            untimed = mismatches and self.brief_failures and config.baseline is None
            samples = [] if untimed else self.timer.time(
                config, lambda: self.state.restore(globals_),
                lambda: self._launch(function, grid, block, smem), stop_above_ms)
            lap("time")
            probe_pending = False
            try:
                numerics = self._numerics_found(config, bool(mismatches),
                                                cached_only=not self.compile_probes)
            except NotCompiled:
                numerics, probe_pending = self._numerics_changes(config), True
            if mismatches:
                lap("probe")  # the contraction probe's runs, where it applies
            occupancy, limit = self._occupancy(function, block, smem)
            return ReplayResult(config, not mismatches, mismatches, samples,
                                compiled.resources if compiled else None,
                                compiled.seconds if compiled else {},
                                compiled.cache_hit if compiled else False,
                                occupancy, limit, len(compiled.cubin) if compiled else 0, spent,
                                compiled, numerics, tolerated, probe_pending)
        finally:
            module.unload()
