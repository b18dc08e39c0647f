"""Element types of a kernel's pointer parameters, where its IR tells.

Pointers are opaque in LLVM IR; the element type shows where a pointer is
used: `getelementptr double, ptr %3, ...`, `load float, ptr %p`, `store i32
%v, ptr %p`, `atomicrmw fadd ptr %p, float %v`. The recorded IR keeps
parameters in stack slots and passes them to the CUDA headers' always-inline
helpers (`atomicAdd`), so those are inlined and SROA runs first; the uses
are then read off the parameters themselves. A parameter used
as one type only gets that type; none or several, no type. A homogeneous
aggregate (`struct {float x, y, z;}`, `float[4]`, arrays of such structs)
counts as its element type.
"""

from __future__ import annotations

import re

from mneme_cc.replay.compiling import irtext
from mneme_cc.replay.compiling.llvm import llvm_binding

_NUMPY = {"half": "float16", "float": "float32", "double": "float64", "i8": "int8",
          "i16": "int16", "i32": "int32", "i64": "int64"}
_TYPE = "|".join(_NUMPY)
_AGGREGATE = r"%[\w.$\"]+|\[\d+ x [^\]]+\]|\{[^}]*\}"


def _scalar(ir_type: str, structs: dict[str, str], depth: int = 0) -> str | None:
    """The one scalar type an (aggregate) IR type is made of, if it is one."""
    ir_type = ir_type.strip()
    if ir_type in _NUMPY:
        return ir_type
    if depth > 8:
        return None
    if ir_type in structs:
        return _scalar(structs[ir_type], structs, depth + 1)
    m = re.fullmatch(r"\[\d+ x (.+)\]", ir_type)
    if m:
        return _scalar(m.group(1), structs, depth + 1)
    m = re.fullmatch(r"<?\{(.*)\}>?", ir_type)
    if m:
        members = {_scalar(t, structs, depth + 1) for t in irtext.split_top_level(m.group(1))}
        return members.pop() if len(members) == 1 else None
    return None


def _promoted(bitcode: bytes, arch: str) -> str:
    """The module with parameters out of their stack slots (SROA)."""
    llvm = llvm_binding()
    module = llvm.parse_bitcode(bitcode)
    machine = llvm.Target.from_triple(module.triple).create_target_machine(cpu=arch)
    builder = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(
        speed_level=0))
    manager = llvm.create_new_module_pass_manager()
    manager.add_always_inliner_pass()
    manager.add_sroa_pass()
    manager.run(module, builder)
    return str(module)


def _function(text: str, name: str) -> tuple[list[str], str] | None:
    """(parameter names, body) of a function defined in the module text."""
    span = irtext.function_span(text, name)
    if span is None:
        return None
    params = [p.split()[-1] if p.split() else "" for p in irtext.parameters(text[span[0]:span[1]])]
    return params, text[span[1]:span[2]]


def _types_of(text: str, function: str, param: int, structs: dict[str, str],
              depth: int = 0) -> set[str | None]:
    """The element types one pointer parameter of a function is used as,
    following it into the functions it is passed to (a few calls deep)."""
    found = _function(text, function)
    if found is None or param >= len(found[0]) or not found[0][param].startswith("%"):
        return set()
    params, body = found
    # `ptr [addrspace(N)] [noundef nonnull align 4 ...] %name`, the name whole.
    pointer = (rf"ptr(?: addrspace\(\d+\))?(?: [a-z_]+(?:\(\d+\))?| align \d+)*? "
               rf"{re.escape(params[param])}{irtext.NAME_END}")
    seen = set(re.findall(rf"getelementptr (?:inbounds )?(?:nuw )?(?:nusw )?"
                          rf"({_TYPE}|{_AGGREGATE}), {pointer}", body))
    seen |= set(re.findall(rf"load ({_TYPE}), {pointer}", body))
    seen |= set(re.findall(rf"store ({_TYPE}) [^,]+, {pointer}", body))
    seen |= set(re.findall(rf"atomicrmw (?:volatile )?\w+ {pointer}, ({_TYPE}) ", body))
    seen |= set(re.findall(rf"cmpxchg (?:weak )?(?:volatile )?{pointer}, ({_TYPE}) ", body))
    scalars = {_scalar(t, structs) for t in seen}
    if depth < 3:  # passed on to a helper: its uses count too
        for callee, args in re.findall(r"call [^@\n]*@(\"[^\"]+\"|[\w.$-]+)\((.*)\)", body):
            for position, arg in enumerate(irtext.split_top_level(args)):
                if re.fullmatch(rf"\s*{pointer}\s*", arg):
                    scalars |= _types_of(text, callee.strip('"'), position, structs, depth + 1)
    return scalars


def pointer_dtypes(instance) -> dict[int, str]:
    """Parameter index -> numpy dtype name, for the instance's kernel's
    pointers used as one type."""
    bitcode = instance.db.kernel(instance.static_hash).bitcode()
    return kernel_pointer_dtypes(bitcode, instance.kernel_name, instance.device["arch"])


def kernel_pointer_dtypes(bitcode: bytes, kernel: str, arch: str) -> dict[int, str]:
    """Parameter index -> numpy dtype name, for a kernel's pointers used as one type."""
    text = _promoted(bitcode, arch)
    found = _function(text, kernel)
    if found is None:
        return {}
    structs = dict(re.findall(r"^(%[\w.$\"]+) = type (.+)$", text, re.M))
    out = {}
    for index in range(len(found[0])):
        scalars = _types_of(text, kernel, index, structs)
        if len(scalars) == 1 and None not in scalars:
            out[index] = _NUMPY[scalars.pop()]
    return out


def argument_dtypes(instance) -> dict[str, str]:
    """`arg:N` -> dtype for the pointer parameters the IR types that point into
    a recorded allocation; nothing when the kernel has no readable IR (an
    nvcc-built application), whose buffers are then compared as bytes."""
    from mneme_cc.errors import RecordDBError, UsageError
    from mneme_cc.replay.judging.verify import policies_for

    try:
        found = pointer_dtypes(instance)
    except (RecordDBError, RuntimeError):
        return {}
    out = {}
    for index, dtype in found.items():
        try:  # a pointer into no recorded allocation (null, a global) names no buffer
            policies_for({f"arg:{index}": {"dtype": dtype}}, instance.params, instance.args,
                         instance.prologue.allocations)
        except UsageError:
            continue
        out[f"arg:{index}"] = dtype
    return out


def buffer_dtypes(instance) -> dict[str, str]:
    """Buffer name ("allocation 0x...") -> dtype, where the IR tells."""
    from mneme_cc.replay.judging.verify import policies_for

    keyed = argument_dtypes(instance)
    policies = policies_for({k: {"dtype": v} for k, v in keyed.items()}, instance.params,
                            instance.args, instance.prologue.allocations)
    return {name: p.dtype for name, p in policies.items() if p.dtype}
