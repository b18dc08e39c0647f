"""Kernels that carry PTX and no IR (nvcc builds, modules an application
loads at run time): what of a ReplayConfig applies to them, and their PTX
with the launch bounds a config asks for.

Such a kernel is compiled from the application's own PTX by ptxas, so the
config's ptxas options (level, register cap) and launch bounds (`.maxntid`,
`.minnctapersm` on the kernel's `.entry`) apply, and geometry as for any
kernel; the IR-level fields (pipeline, specialisation, contraction) do not.
"""

from __future__ import annotations

import re

from mneme_cc.errors import UsageError
from mneme_cc.replay.config import ReplayConfig

#: The fields that transform IR: a kernel without IR keeps their defaults.
IR_FIELDS = ("pipeline", "tuning", "codegen_opt_level", "specialize_args", "specialize_dims",
             "fp_reassociate", "fp_contract", "pin_contraction", "keep_debug_info",
             "opt_bisect_limit")
#: nvcc's (and every PTX-loading runtime's) ptxas level unless told otherwise.
DEFAULT_PTXAS_LEVEL = 3
_BOUND_DIRECTIVES = re.compile(r"\.(?:maxntid|reqntid|minnctapersm|maxnctapersm)\b[^\n{]*")


def ir_settings(config: ReplayConfig) -> list[str]:
    """The IR-level fields a config sets away from their defaults."""
    default = ReplayConfig()
    grounded = config.grounded()
    return [name for name in IR_FIELDS if getattr(grounded, name) != getattr(default, name)]


def check_applies(config: ReplayConfig, kernel_name: str) -> None:
    """A one-line error when a config asks a PTX kernel for IR transforms."""
    found = ir_settings(config)
    if found:
        raise UsageError(f"{kernel_name} carries PTX, not IR: {', '.join(found)} cannot apply "
                         "(only ptxas options, launch bounds and geometry do)")


def numerics_changes(config: ReplayConfig) -> list[str]:
    """Why a config may round differently from the application's PTX build."""
    level = config.grounded().ptxas_opt_level
    if level != DEFAULT_PTXAS_LEVEL:
        return [f"ptxas -O{level} instead of the default -O{DEFAULT_PTXAS_LEVEL} may contract "
                "differently the multiplies and adds the PTX leaves unfused"]
    return []


def _entry_span(ptx: str, kernel: str) -> tuple[int, int]:
    """(end of the parameter list, the body's `{`) of kernel's `.entry`."""
    match = re.search(r"\.entry\s+" + re.escape(kernel) + r"\s*\(", ptx)
    if match is None:
        raise UsageError(f"the PTX defines no kernel {kernel}")
    close = ptx.find(")", match.end())
    body = ptx.find("{", close)
    if close < 0 or body < 0:
        raise UsageError(f"the PTX of {kernel} is cut short")
    return close + 1, body


def with_launch_bounds(ptx: str, kernel: str, max_threads: int | None,
                       min_blocks: int | None) -> str:
    """kernel's `.entry` with `.maxntid` (and `.minnctapersm`) in place of the
    bounds the PTX had."""
    start, body = _entry_span(ptx, kernel)
    directives = _BOUND_DIRECTIVES.sub("", ptx[start:body]).strip()
    bounds = []
    if max_threads is not None:
        bounds.append(f".maxntid {max_threads}, 1, 1")
    if min_blocks is not None:
        bounds.append(f".minnctapersm {min_blocks}")
    middle = "\n".join(filter(None, [directives, *bounds]))
    return f"{ptx[:start]}\n{middle}\n{ptx[body:]}"


def ptx_for_config(ptx: str, kernel: str, config: ReplayConfig,
                   block: tuple[int, int, int]) -> str:
    """The PTX to assemble for config (block: the launch's, for bounds that
    name no thread count)."""
    grounded = config.grounded()
    if not grounded.launch_bounds:
        return ptx
    threads = grounded.max_threads or block[0] * block[1] * block[2]
    return with_launch_bounds(ptx, kernel, threads, grounded.min_blocks_per_sm)
