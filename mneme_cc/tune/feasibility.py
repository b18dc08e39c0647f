"""Configurations the GPU or ptxas will refuse, known before compiling.

From the device's limits and what the kernel needs at the recorded settings
(its registers, from the `ir` baseline's compile), a configuration is
infeasible when its launch cannot start (more threads or registers than a
block may have, a block larger than its own launch bounds) or when it asks
ptxas for a register budget far below the kernel's need (launch bounds or a
register cap that forces heavy spilling, or under the 16 registers ptxas
needs at all). Such a trial is pruned, not paid for.

A kernel written for its recorded geometry may read past a buffer or a
shared tile at another one; the fault costs a GPU worker's restart. So a
launch geometry that faulted once is ruled out for the rest of the study.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass

from mneme_cc.replay import outcome as oc
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.tune.properties import DeviceProperties

#: Registers are given to a warp in units of 256, so per thread in steps of 8.
REGISTER_STEP = 8
MIN_REGISTERS = 16
MAX_REGISTERS = 255
#: A budget below this fraction of what the kernel needs spills badly.
SPILL_FLOOR = 0.5


@dataclass(frozen=True)
class Need:
    """What the kernel needs at the recorded settings (None: not known)."""

    registers: int | None = None
    shared_bytes: int = 0   # static plus the launch's dynamic shared memory


def _warp_threads(threads: int, props: DeviceProperties) -> int:
    return -(-threads // props.warp_size) * props.warp_size


def bounds_budget(max_threads: int, min_blocks: int, props: DeviceProperties) -> int:
    """Registers per thread that launch bounds leave ptxas."""
    per_block = props.max_registers_per_block // (min_blocks * _warp_threads(max_threads, props))
    return min(MAX_REGISTERS, per_block // REGISTER_STEP * REGISTER_STEP)


def infeasible(config: ReplayConfig, recorded_block: tuple[int, int, int],
               props: DeviceProperties, need: Need) -> str | None:
    """Why this configuration cannot run well enough to be worth a trial (None: it can)."""
    threads = math.prod(config.block or recorded_block)
    if threads > props.max_threads_per_block:
        return f"a block of {threads} threads exceeds the GPU's {props.max_threads_per_block}"
    budget = MAX_REGISTERS
    if config.launch_bounds:
        max_threads = config.max_threads or threads
        if threads > max_threads:
            return f"a block of {threads} threads exceeds its launch bounds ({max_threads})"
        min_blocks = config.min_blocks_per_sm or 1
        if min_blocks * _warp_threads(max_threads, props) > props.max_threads_per_multiprocessor:
            return (f"{min_blocks} blocks of {max_threads} threads do not fit on one SM "
                    f"({props.max_threads_per_multiprocessor} threads)")
        if min_blocks * need.shared_bytes > props.max_shared_per_block_optin:
            return (f"{min_blocks} blocks of {need.shared_bytes} bytes of shared memory do not "
                    "fit on one SM")
        budget = bounds_budget(max_threads, min_blocks, props)
    if config.max_registers is not None:
        budget = min(budget, config.max_registers)
    if budget < MIN_REGISTERS:
        return f"a budget of {budget} registers per thread is below ptxas's {MIN_REGISTERS}"
    if need.registers is None:
        return None
    if budget < SPILL_FLOOR * need.registers:
        return (f"a budget of {budget} registers per thread, for a kernel that needs "
                f"{need.registers}, spills heavily")
    used = min(budget, need.registers)
    if used * _warp_threads(threads, props) > props.max_registers_per_block:
        return (f"{threads} threads of {used} registers exceed a block's "
                f"{props.max_registers_per_block} registers")
    return None


class FaultingGeometries:
    """Launch geometries other than the recorded one whose kernel faulted on
    the device (an illegal address and the like) in this study, and the
    larger blocks. A kernel that faults with larger blocks than the recorded
    one mostly sizes something by the recorded block (a shared tile, a
    per-block array): larger blocks fault too, and each fault costs a GPU
    worker's restart. Once configurations of two different compile settings
    have faulted with blocks above the recorded size (so that the block, not
    one compile, is the likely cause), blocks at least as large as the
    smallest at which two settings have faulted are not run. The executor
    asks too, from its GPU threads, as a queued trial reaches the GPU."""

    def __init__(self, grid: tuple[int, int, int], block: tuple[int, int, int]):
        self._lock = threading.Lock()
        self.recorded = (tuple(grid), tuple(block))
        self.threads = math.prod(block)
        self.faulted: dict[tuple, str] = {}  # (grid, block) -> the error
        self.above: dict[str, tuple[int, str]] = {}  # compile settings -> fewest threads, error

    def _geometry(self, config: ReplayConfig) -> tuple:
        return (tuple(config.grid or self.recorded[0]), tuple(config.block or self.recorded[1]))

    def note(self, config: ReplayConfig, outcome: str, error: str) -> None:
        geometry = self._geometry(config)
        # A worker that died, a host-side failure or a probe's run (at the
        # recorded geometry) says nothing about the geometry.
        if outcome == oc.RUNTIME_ERROR and geometry != self.recorded and "CUDA_ERROR_" in error \
                and not error.startswith(oc.PROBE_FAULT):
            said = error.splitlines()[0][:120]
            threads = math.prod(geometry[1])
            compiled = json.dumps(config.compile_fields(), sort_keys=True, default=str)
            with self._lock:
                self.faulted.setdefault(geometry, said)
                if threads > self.threads and threads < self.above.get(compiled, (math.inf,))[0]:
                    self.above[compiled] = (threads, said)

    def reason(self, config: ReplayConfig) -> str | None:
        geometry = self._geometry(config)
        with self._lock:
            error = self.faulted.get(geometry)
            above = sorted(self.above.values())
        if error is not None:
            return f"grid {geometry[0]}, block {geometry[1]} faulted earlier in this study ({error})"
        if len(above) >= 2:
            # The smallest block at which two compile settings have faulted.
            threads, said = above[1]
            if math.prod(geometry[1]) >= threads:
                return (f"blocks of {threads} threads or more faulted earlier in this study "
                        f"({said}); larger blocks are not run")
        return None
