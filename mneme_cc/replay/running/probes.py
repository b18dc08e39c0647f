"""`Probes`: what a replay session runs beyond the configuration asked for,
to explain a failed verification: the application's kernel again, for
nondeterminism (mneme_cc.replay.judging.nondeterminism), and the
configuration with contraction off, for a different fusion of multiply-adds
(mneme_cc.replay.judging.contraction_probe). A part of `Replayer`, which
owns the session's device state, loads and launches.
"""

from __future__ import annotations

import numpy as np

from mneme_cc.errors import MnemeError
from mneme_cc.record.db import ALLOCATION
from mneme_cc.replay import outcome as oc
from mneme_cc.replay.compiling.numerics import codegen_of
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.judging import contraction_probe as probe
from mneme_cc.replay.judging import nondeterminism as nd
from mneme_cc.replay.running import device as dev
from mneme_cc.replay.running.device_state import DeviceCopies


def buffer_name(region) -> str:
    """How results name a buffer: an allocation by address, a global by name."""
    return f"allocation {region.address:#x}" if region.kind == ALLOCATION else region.name


def _raise_if_sticky(exc: Exception) -> None:
    """A probe that cannot run leaves the failure as it is, unless the device
    lost its context: then the session cannot go on, and says so, as the
    probe's fault rather than the configuration's launch."""
    if isinstance(exc, dev.DeviceError) and exc.code in oc.STICKY:
        raise dev.DeviceError(f"{oc.PROBE_FAULT}{exc}", exc.code) from None


class Probes:
    """The probes of a Replayer session (see the module's docstring)."""

    def _put_back_unwritten(self) -> None:
        """What verification puts back, without judging: the allocations a run
        changed where the recording wrote nothing (compared on the device; a
        probe's runs differ from the recording by design, and judging them
        would build statistics nobody reads)."""
        written = self.state.written_addresses
        for region, _, _ in self._differing(r for r in self.instance.epilogue.allocations
                                            if r.address not in written):
            self.state.put_back(region)

    # -- nondeterminism ----------------------------------------------------------

    def _run(self, config: ReplayConfig, runs: int, after_each,
             cached_only: bool = False) -> None:
        """Runs config `runs` times, each from the prologue at its geometry, and
        calls after_each(globals_) after each run, with its module loaded
        (`cached_only`: NotCompiled unless the compile cache holds it)."""
        inst = self.instance
        module, function, globals_, _ = self._load(config, cached_only=cached_only)
        smem = inst.shared_mem_bytes if config.shared_mem_bytes is None else config.shared_mem_bytes
        try:
            self._allow_shared_memory(function, smem)
            # What an earlier run wrote where the recording did not: put back.
            self._put_back_unwritten()
            for _ in range(runs):
                self.state.restore(globals_)
                self._launch(function, config.grid or inst.grid, config.block or inst.block, smem)
                self.device.synchronize("running a probe")
                after_each(globals_)
                self._put_back_unwritten()
        finally:
            module.unload()

    def _outputs(self, config: ReplayConfig, runs: int = 1) -> list[dict[str, np.ndarray]]:
        """What the epilogue covers after each of `runs` runs of config, read back."""
        out: list[dict[str, np.ndarray]] = []
        self._run(config, runs, lambda globals_: out.append(
            {buffer_name(r): r.data for r in self.state.output_regions(globals_)}))
        return out

    def _probe(self) -> nd.Nondeterminism:
        """Runs the application's kernel (the IR at the recorded settings without
        its image) again from the prologue and compares the runs."""
        reference = ReplayConfig(baseline="original" if self.kernel.description.get("image")
                                 else "ir")
        recorded = {buffer_name(r): self.state.expected.host(r)
                    for r in self.instance.epilogue.regions}
        return nd.found(reference.baseline, recorded, self._element_types(),
                        self._outputs(reference, nd.RUNS),
                        lambda count: self._outputs(reference, count))

    def _probed(self) -> bool:
        """After a failed verification: whether a probe just found nondeterminism
        (once per instance; a probe that cannot run leaves the failure as it is)."""
        if not self.probe_nondeterminism or self.nondeterminism is not None:
            return False
        try:
            self.nondeterminism = self._probe()
        except MnemeError as exc:
            _raise_if_sticky(exc)
            self.probe_nondeterminism = False
            return False
        try:
            nd.store(self.instance, self.nondeterminism)
        except OSError:
            pass  # a read-only database: the finding holds for this session
        return not self.nondeterminism.deterministic

    def probe(self, config: ReplayConfig) -> list[str]:
        """How config's numerics differ from the build's, after a replay of it
        failed verification with its probe pending (`compile_probes` off):
        the contraction probe run now, compiling what it still lacks."""
        return self._numerics_found(config, failed=True)

    def _numerics_found(self, config: ReplayConfig, failed: bool,
                        cached_only: bool = False) -> list[str]:
        """How config's numerics differ from the build's: the rules' answer, or
        after a failure the contraction probe's where the rules cannot tell
        (`cached_only`: NotCompiled when a variant the probe runs is not in
        the compile cache)."""
        declared = self._numerics_changes(config)
        if not failed or not self.kernel.has_ir:
            return declared
        codegen = codegen_of(self.kernel)
        # Runs that differ by themselves cannot be compared bit for bit.
        if not probe.applies(config, codegen) or (
                self.nondeterminism and not self.nondeterminism.deterministic):
            return declared
        try:
            if self._unfused_reference is None:
                reference = KeptOutputs(self.device)
                try:
                    self._run(probe.reference(codegen), 1, lambda g: self._keep(reference, g),
                              cached_only)
                except BaseException:
                    reference.close()
                    raise
                self._unfused_reference = reference
            same: list[bool] = []
            self._run(probe.without_contraction(config), 1,
                      lambda g: same.append(self._same_as(self._unfused_reference, g)), cached_only)
        except (MnemeError, RuntimeError) as exc:  # RuntimeError: LLVM refused the compile
            _raise_if_sticky(exc)
            return declared
        if same[0]:
            return [probe.REASON]
        return []  # what only may have changed the fusion did not: it computes something else

    def _keep(self, kept: KeptOutputs, globals_: dict[str, int]) -> None:
        """What the epilogue covers now, on the device, by buffer name."""
        regions = self.state.output_addresses(globals_)
        differ = {r.address for r, _, _ in
                  self._differing(r for r, _ in regions if r.kind == ALLOCATION)}
        for region, address in regions:
            name = buffer_name(region)
            if region.kind == ALLOCATION and region.address not in differ:
                # As recorded: the recording's own device copy stands for it.
                kept.at[name] = self.state.expected.on_device(region)
                continue
            copy = self.device.alloc(max(region.size, 1), "allocating a probe's copy")
            kept.copies.add(name, copy, region.size)
            kept.at[name] = copy
            if region.size:
                self.device.copy_dtod(copy, address, region.size, "copying a probe's output")
        # Done before the next probe's restore, on the stream, overwrites what was copied.
        self.device.finish_copies("copying a probe's output")

    def _same_as(self, kept: KeptOutputs, globals_: dict[str, int]) -> bool:
        """Whether what the epilogue covers now equals `kept` bit for bit
        (NaN payloads and signed zeros included), compared on the device."""
        regions = self.state.output_addresses(globals_)
        if {buffer_name(r) for r, _ in regions} != kept.at.keys():
            return False
        pairs = [(address, kept.at[buffer_name(region)], region.size)
                 for region, address in regions if region.size]
        return all(count == 0 for count, _ in self.comparer.differing_all(pairs))


class KeptOutputs:
    """The contraction probe's reference outputs on the device, by buffer name:
    a copy where they differ from the recorded epilogue, else the epilogue's
    own device copy (ExpectedOutput's, not owned here)."""

    def __init__(self, device: dev.Device):
        self.copies = DeviceCopies(device)
        self.at: dict[str, int] = {}

    def close(self) -> None:
        self.copies.close()
        self.at.clear()
