"""The JIT: a recorded kernel's IR to PTX under a ReplayConfig (llvmlite only).

Stages, each timed: parse the bitcode; specialise (launch dimensions and
chosen scalar arguments become constants, launch bounds become attributes);
optimise (`default<O0..O3>` with clang's tuning options for the level, or a
comma list of named passes); apply the build's contraction mode
(mneme_cc.replay.compiling.numerics); generate PTX for the target arch. The
transforms edit the module's text form (mneme_cc.replay.compiling.irtext):
specialisation touches only the kernel's definition line and body, the
numerics rules every function; the verifier checks the result before
anything else runs.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field

from mneme_cc.errors import RecordDBError, UsageError
from mneme_cc.replay.compiling import contraction, irtext, numerics
from mneme_cc.replay.compiling.llvm import llvm_binding, named_passes, pipeline_of
from mneme_cc.replay.compiling.mutations import MUTATIONS
from mneme_cc.replay.compiling.numerics import Codegen
from mneme_cc.replay.compiling.pipeline import clang_tuning
from mneme_cc.replay.config import ReplayConfig


@dataclass
class JitResult:
    ptx: str
    ir: str                    # the optimised module, as text
    seconds: dict[str, float] = field(default_factory=dict)  # per stage
    bisect_log: str = ""       # LLVM's "BISECT: ..." lines, under opt_bisect_limit


@dataclass(frozen=True)
class KernelLaunch:
    """What the JIT needs to know of the recorded launch."""
    name: str                   # mangled kernel name
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: bytes = b""           # the packed parameter buffer
    params: tuple[tuple[int, int], ...] = ()  # (offset, size) per parameter


_DIM_CALL = re.compile(
    r"(%[\w.]+) = (?:tail )?call [^@\n]*@llvm\.nvvm\.read\.ptx\.sreg\.(ntid|nctaid)\.([xyz])\(\)")


def _constant(ir_type: str, raw: bytes) -> str:
    """An LLVM constant of ir_type holding the recorded bytes."""
    if re.fullmatch(r"i\d+", ir_type):
        bits = int(ir_type[1:])
        value = int.from_bytes(raw[: (bits + 7) // 8], "little", signed=True)
        return str(value)
    if ir_type == "float":
        (value,) = struct.unpack("<f", raw[:4])
        return f"0x{struct.unpack('<Q', struct.pack('<d', value))[0]:016X}"
    if ir_type == "double":
        return f"0x{struct.unpack('<Q', raw[:8])[0]:016X}"
    if ir_type == "ptr":
        return f"inttoptr (i64 {int.from_bytes(raw[:8], 'little')} to ptr)"
    raise UsageError(f"cannot specialise a parameter of type {ir_type}")


def specialize(text: str, launch: KernelLaunch, config: ReplayConfig) -> str:
    """Dimension and argument specialisation, launch bounds and floating-point
    reassociation, on the module text."""
    start, line_end, body_end = irtext.kernel_span(text, launch.name)
    define, body = text[start:line_end], text[line_end:body_end]
    grid = config.grid or launch.grid
    block = config.block or launch.block
    if config.specialize_args:
        params = irtext.parameters(define)
        for index in config.specialize_args:
            if index >= len(params) or index >= len(launch.params):
                raise UsageError(f"specialize_args: the kernel has {len(params)} parameters, "
                                 f"no parameter {index}")
            tokens = params[index].split()
            ir_type, name = tokens[0], tokens[-1]
            if "byval" in params[index]:
                raise UsageError(f"parameter {index} is an aggregate passed by value; "
                                 "it cannot be specialised")
            offset, size = launch.params[index]
            value = _constant(ir_type, launch.args[offset:offset + size])
            body = re.sub(rf"{re.escape(name)}(?![\w.])", value, body)
    if config.launch_bounds:
        threads = config.max_threads or block[0] * block[1] * block[2]
        attrs = f' "nvvm.maxntid"="{threads}"'
        if config.min_blocks_per_sm:
            attrs += f' "nvvm.minctasm"="{config.min_blocks_per_sm}"'
        define = re.sub(r"\)(\s*(?:#\d+\s*)?)\{$", rf"){attrs}\1{{", define)
    text = text[:start] + define + body + text[body_end:]
    if config.specialize_dims:
        # Module-wide: clang reads the registers in small helpers the kernel
        # calls.  Only this kernel is launched from the compiled module.
        dims = {"ntid": block, "nctaid": grid}
        text = _DIM_CALL.sub(
            lambda m: f"{m.group(1)} = add i32 0, {dims[m.group(2)]['xyz'.index(m.group(3))]}",
            text)
    if config.fp_reassociate:
        # LLVM reassociates floating-point operations that carry both flags
        # (nsz: a reordered sum may differ in the sign of a zero). Module-wide,
        # like fast-math: the kernel's helpers are inlined into it.
        text = _REASSOCIABLE.sub(r"\1 reassoc nsz ", text)
    if config.specialize_args or config.specialize_dims:  # values became constants
        text = irtext.drop_use_list_orders(text)
    return text


_REASSOCIABLE = re.compile(r"(= (?:fadd|fsub|fmul))\s")


def _optimize_apart(text: str, arch: str, features: str, config: ReplayConfig,
                    kernel: str) -> tuple[str, str]:
    """The pipeline under LLVM's -opt-bisect-limit, run in a child process:
    (optimised module text, LLVM's "BISECT: ..." lines). The option is global
    and, once set, LLVM numbers passes on from where it stopped and keeps
    printing; a fresh process counts from 1 and leaves this one untouched."""
    payload = json.dumps({"ir": text, "arch": arch, "features": features,
                          "config": config.to_dict(), "kernel": kernel})
    proc = subprocess.run([sys.executable, "-m", "mneme_cc.replay.compiling.jit"], input=payload,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [x for x in proc.stderr.splitlines() if not x.startswith("BISECT: ")]
        raise RuntimeError(f"the bisection compile failed: {lines[-1] if lines else proc.returncode}")
    return proc.stdout, "\n".join(x for x in proc.stderr.splitlines() if x.startswith("BISECT: "))


def _optimize_child() -> None:
    """`python -m mneme_cc.replay.compiling.jit`: _optimize_apart's other side."""
    job = json.loads(sys.stdin.read())
    config = ReplayConfig.from_json(job["config"])
    llvm = llvm_binding()
    llvm.set_option("", f"-opt-bisect-limit={config.opt_bisect_limit}")
    module = llvm.parse_assembly(irtext.parseable(job["ir"]))
    machine = llvm.Target.from_triple(module.triple).create_target_machine(
        cpu=job["arch"], features=job["features"], opt=config.codegen_opt_level)
    sys.stdout.write(str(_optimize(llvm, module, machine, config, job["kernel"])))


def _optimize(llvm, module, machine, config, kernel: str):
    """Runs the pipeline; a pass list runs in segments around mneme's mutations."""
    pipeline = pipeline_of(config.pipeline)
    if pipeline.level is not None:
        options = llvm.create_pipeline_tuning_options(speed_level=pipeline.level)
        for name, value in {**clang_tuning(pipeline.level), **config.tuning}.items():
            setattr(options, name, value)
        builder = llvm.create_pass_builder(machine, options)
        builder.getModulePassManager().run(module, builder)
        return module
    passes = named_passes()
    segment: list[str] = []

    def run_segment() -> None:
        if segment:
            options = llvm.create_pipeline_tuning_options(speed_level=0)
            builder = llvm.create_pass_builder(machine, options)
            manager = llvm.create_new_module_pass_manager()
            for name in segment:
                getattr(manager, passes[name])()
            manager.run(module, builder)
            segment.clear()

    for name in pipeline.passes:
        if name in MUTATIONS:
            run_segment()
            mutated = MUTATIONS[name](str(module), kernel)
            module = llvm.parse_assembly(irtext.parseable(irtext.drop_use_list_orders(mutated)))
        else:
            segment.append(name)
    run_segment()
    return module


def compile_ptx(bitcode: bytes, launch: KernelLaunch | None, config: ReplayConfig,
                arch: str, codegen: Codegen) -> JitResult:
    """The recorded module compiled for arch (e.g. "sm_90") as `config` says,
    with the numerics of the build `codegen` describes where the config keeps
    them. Without a launch the whole module is compiled and nothing is
    specialised."""
    llvm = llvm_binding()
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    try:
        module = llvm.parse_bitcode(bitcode)
    except RuntimeError as exc:  # a damaged or foreign database: said, not a traceback
        raise RecordDBError(f"the recorded IR is not LLVM bitcode LLVM {llvm.llvm_version_info[0]}"
                            f" can read ({' '.join(str(exc).split())}); record the application "
                            "again") from None
    text = str(module)
    seconds["parse"] = time.perf_counter() - t

    t = time.perf_counter()
    mode = numerics.contract_mode(config, codegen)
    if not config.keep_debug_info:
        text = irtext.strip_debug_info(text)
    if launch is not None:
        text = specialize(text, launch, config)
    if mode == "off" and codegen.contract != "off":
        # What the front end makes under -ffp-contract=off (fmuladd split: new uses).
        text = irtext.drop_use_list_orders(contraction.strip_contract(text))
    module = llvm.parse_assembly(irtext.parseable(text))
    module.verify()
    seconds["transform"] = time.perf_counter() - t

    features = ""
    m = re.search(r'"target-features"="([^"]*)"', text)
    if m:
        features = m.group(1)
    target = llvm.Target.from_triple(module.triple)
    machine = target.create_target_machine(cpu=arch, features=features,
                                           opt=config.codegen_opt_level)
    t = time.perf_counter()
    bisect_log = ""
    kernel = launch.name if launch is not None else ""
    if config.opt_bisect_limit is None:
        module = _optimize(llvm, module, machine, config, kernel)
    else:
        optimised, bisect_log = _optimize_apart(str(module), arch, features, config, kernel)
        module = llvm.parse_assembly(irtext.parseable(optimised))
    seconds["optimize"] = time.perf_counter() - t

    t = time.perf_counter()
    if config.codegen_opt_level > 0 or mode == "fast":
        text = str(module)
        if config.codegen_opt_level > 0:
            # NVPTX's IR peephole (off in llvm_binding), on the IR's own flags;
            # then the back end's -ffp-contract=fast, which llvmlite's target
            # machine cannot take, as flags on every operation. Both keep
            # the order of every value's uses that remains (codegen visits
            # uses in it).
            text = contraction.fold_fma(text)
            if mode == "fast":
                text = contraction.mark_contract(text)
        else:
            text = irtext.drop_use_list_orders(contraction.fuse_like_backend(text))
        module = llvm.parse_assembly(irtext.parseable(text))
    seconds["contract"] = time.perf_counter() - t

    t = time.perf_counter()
    ptx = machine.emit_assembly(module)
    if config.pin_contraction:
        ptx = contraction.pin_ptx(ptx)
    seconds["codegen"] = time.perf_counter() - t
    return JitResult(ptx, str(module), seconds, bisect_log)


if __name__ == "__main__":
    _optimize_child()
