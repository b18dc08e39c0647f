"""`mneme replay -rdb DIR [-rid ID | --kernel NAME] [options] [PIPELINE]`.

Exit status: 0 verified, 1 failed verification, 2 usage or environment error.
JSON on stdout when piped (or with --json), a table on a terminal.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli._errors import reports_errors
from mneme_cc.cli._options import find_instance, int_list, policies_file

#: Exit status when the replayed kernel does not reproduce the epilogue.
EXIT_FAILED_VERIFICATION = 1


def _dims(text: Optional[str], name: str):
    if text is None:
        return None
    dims = int_list(text, name, "X[,Y[,Z]]")
    if not 1 <= len(dims) <= 3:
        from mneme_cc.errors import UsageError

        raise UsageError(f"{name} '{text}' is not X[,Y[,Z]]")
    return dims + (1,) * (3 - len(dims))


def _tuning(text: Optional[str]) -> dict:
    """`loop_unrolling=false,inlining_threshold=500` -> {name: bool | int}."""
    from mneme_cc.errors import UsageError

    out: dict = {}
    for item in filter(None, (text or "").split(",")):
        name, _, value = item.partition("=")
        if value.lower() in ("true", "false"):
            out[name.strip()] = value.lower() == "true"
        else:
            try:
                out[name.strip()] = int(value)
            except ValueError:
                raise UsageError(f"--tuning '{item}' is not NAME=true|false|INTEGER") from None
    return out


def result_summary(inst, result) -> dict:
    return {
        "instance": inst.name, "kernel": inst.kernel_name, "outcome": result.outcome,
        "failure": result.failure, "numerics": result.numerics,
        "nondeterministic": result.nondeterministic,
        "config": result.config.to_dict(),
        "mismatches": [dataclasses.asdict(m) for m in result.mismatches],
        "samples_ms": result.samples_ms, "median_ms": result.median_ms,
        "min_ms": result.min_ms, "mean_ms": result.mean_ms, "stdev_ms": result.stdev_ms,
        "in_app_ms": inst.in_app_ms,
        "resources": dataclasses.asdict(result.resources) if result.resources else None,
        "compile_seconds": result.compile_seconds, "cache_hit": result.cache_hit,
        "occupancy": result.occupancy, "max_threads_per_block": result.max_threads_per_block,
        "cubin_bytes": result.cubin_bytes,
    }


@reports_errors
def replay(
    database: Annotated[Path, typer.Option("-rdb", "--rdb",
                                           help="The record database (or DIR/<static>.json).")],
    pipeline: Annotated[Optional[str], typer.Argument(
        help="default<O0>..default<O3>, or a comma list of passes.")] = None,
    rid: Annotated[Optional[str], typer.Option("-rid", "--rid",
                                               help="Instance: <static>.<dynamic> or dynamic hash.")] = None,
    kernel: Annotated[Optional[str], typer.Option(help="Kernel (name or static hash).")] = None,
    baseline: Annotated[Optional[str], typer.Option(
        help="original (the application's kernel) or ir (recorded IR, recorded settings).")] = None,
    config_file: Annotated[Optional[Path], typer.Option("--config",
                                                        help="A ReplayConfig as JSON.")] = None,
    grid: Annotated[Optional[str], typer.Option(help="X[,Y[,Z]]")] = None,
    block: Annotated[Optional[str], typer.Option(help="X[,Y[,Z]]")] = None,
    tuning: Annotated[Optional[str], typer.Option(
        help="LLVM tuning options, e.g. loop_unrolling=false,inlining_threshold=500.")] = None,
    specialize_args: Annotated[Optional[str], typer.Option(help="Parameter indices, e.g. 3,4.")] = None,
    specialize_dims: Annotated[bool, typer.Option(help="Make blockDim/gridDim constants.")] = False,
    launch_bounds: Annotated[bool, typer.Option(help="Emit launch bounds.")] = False,
    fp_reassociate: Annotated[bool, typer.Option(
        help="Let LLVM reassociate floating-point arithmetic (reassoc flags).")] = False,
    fp_contract: Annotated[Optional[str], typer.Option(
        help="Multiply-add contraction: fast, on or off (default: the application's build's).")]
    = None,
    pin_contraction: Annotated[bool, typer.Option(
        help="Write unfused f32/f64 add/sub/mul as .rn so that no ptxas level fuses them.")]
    = False,
    keep_debug_info: Annotated[bool, typer.Option(
        help="Keep the IR's debug information (-g builds); ptxas then runs at -O0 with "
             "-lineinfo. By default it is stripped: ptxas refuses optimised debugging.")]
    = False,
    min_blocks: Annotated[Optional[int], typer.Option(help="Min blocks per SM (launch bounds).")] = None,
    max_registers: Annotated[Optional[int], typer.Option(help="ptxas -maxrregcount.")] = None,
    ptxas_opt: Annotated[int, typer.Option("--ptxas-O", help="ptxas -O level.")] = 3,
    iterations: Annotated[int, typer.Option(help="Timed launches.")] = 20,
    warmup: Annotated[int, typer.Option(help="Untimed launches first.")] = 3,
    flush_l2: Annotated[bool, typer.Option(help="Flush L2 before every timed launch.")] = False,
    verify: Annotated[Optional[Path], typer.Option(
        help="Per-buffer verification policies as JSON (docs/replay.md).")] = None,
    device: Annotated[int, typer.Option(help="GPU ordinal.")] = 0,
    emit: Annotated[Optional[Path], typer.Option(
        help="Write the IR, PTX and cubin that ran into this directory.")] = None,
    save_output: Annotated[Optional[Path], typer.Option(
        help="Keep the device state after the replay in this new directory (for mneme "
             "diff).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Replay one recorded instance under a configuration: verify it, time it."""
    from mneme_cc.replay.config import ReplayConfig
    from mneme_cc.replay.running.replayer import Replayer

    config = ReplayConfig.load(config_file) if config_file is not None else ReplayConfig(
        grid=_dims(grid, "--grid"), block=_dims(block, "--block"),
        pipeline=pipeline or "default<O3>", tuning=_tuning(tuning), ptxas_opt_level=ptxas_opt,
        max_registers=max_registers, specialize_args=int_list(
            specialize_args, "--specialize-args", "a list of parameter indices"),
        specialize_dims=specialize_dims, launch_bounds=launch_bounds,
        fp_reassociate=fp_reassociate, fp_contract=fp_contract, pin_contraction=pin_contraction,
        keep_debug_info=keep_debug_info, min_blocks_per_sm=min_blocks, iterations=iterations,
        warmup=warmup, baseline=baseline, verify=policies_file(verify), flush_l2=flush_l2)
    _check_early(config, emit, device)
    inst = find_instance(database, rid, kernel)
    replayer = Replayer(inst, device=device)
    replayer.preflight(config, save_output)  # before the GPU is taken
    with replayer:
        result = replayer.replay(config, save_output=save_output)
    summary = {**result_summary(inst, result),
               **({"saved_output": str(save_output)} if save_output is not None else {}),
               **({"emitted": [str(p) for p in result.emit(emit)]} if emit is not None else {})}
    if as_json or not sys.stdout.isatty():
        print(json.dumps(summary, indent=2))
    else:
        _print_result(inst, result)
    if not result.verified:
        raise typer.Exit(EXIT_FAILED_VERIFICATION)


def _check_early(config, emit: Optional[Path], device: int = 0) -> None:
    """Mistakes in the options, reported before the database is read."""
    from mneme_cc.errors import UsageError

    if device < 0:
        raise UsageError(f"--device is a GPU ordinal (0, 1, ...), not {device}")
    if config.min_blocks_per_sm is not None and config.min_blocks_per_sm < 1:
        raise UsageError(f"--min-blocks is a count of blocks per SM (at least 1), not "
                         f"{config.min_blocks_per_sm}")
    for name in ("grid", "block"):
        dims = getattr(config, name)
        if dims is not None and max(dims) >= 1 << 31:  # past any launch CUDA takes
            raise UsageError(f"--{name} {','.join(map(str, dims))}: a side past 2^31 - 1")

    if config.baseline is None:
        from mneme_cc.replay.compiling.llvm import pipeline_of

        pipeline_of(config.pipeline)
    if emit is not None and config.baseline == "original":
        raise UsageError("--emit writes what mneme-cc compiled; the 'original' baseline runs "
                         "the application's own binary")


def _print_result(inst, result) -> None:
    from rich.console import Console

    console = Console()
    colour = "green" if result.verified else "red"
    console.print(f"[bold]{inst.demangled}[/] {inst.name}: "
                  f"[{colour}]{result.outcome}[/]")
    console.print(f"  median {result.median_ms:.4f} ms (min {result.min_ms:.4f}, "
                  f"stdev {result.stdev_ms:.4f}; in-app {inst.in_app_ms:.4f} ms)")
    if result.resources:
        r = result.resources
        console.print(f"  {r.registers} registers, {r.spill_stores}/{r.spill_loads} bytes "
                      f"spilled, {r.shared_bytes} bytes smem")
    if result.numerics:
        console.print("  numerics-changing: " + "; ".join(result.numerics))
    if result.nondeterministic:
        console.print("  within the nondeterministic spread: "
                      + ", ".join(result.nondeterministic))
    if result.failure:
        console.print(f"  [red]{result.failure}[/]")
    for m in result.mismatches:
        worst = f", worst abs {m.worst_abs:.3g}" if m.worst_abs is not None else ""
        console.print(f"  [red]{m.buffer}[/]: {m.count} element(s) differ{worst}, first at "
                      f"{m.first_indices}")
