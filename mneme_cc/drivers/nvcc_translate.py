"""mneme-nvcc: reading nvcc's command line into a Translation."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from mneme_cc.drivers import invocation, nvcc_identity
from mneme_cc.drivers.nvcc_options import (
    _ADVICE,
    _ARCH,
    _CLANG_FLAGS,
    _CLANG_PREFIXES,
    _DEVICE_INPUTS,
    _JOINED,
    _LANGUAGES,
    _LONG,
    _SHORT,
    _WERROR_KINDS,
    NvccError,
    Translation,
    _Option,
)

# ----------------------------------------------------------------------------
# Reading the command line


def _read_options_file(path: str, active: frozenset[Path]) -> list[str]:
    resolved = Path(path).resolve()
    if resolved in active:
        raise NvccError(f"options file {path} includes itself")
    try:
        words = shlex.split(resolved.read_text(errors="replace"))
    except OSError as exc:
        raise NvccError(f"cannot read options file {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise NvccError(f"options file {path}: {exc}") from None
    return expand_options_files(words, active | {resolved})


def expand_options_files(args: list[str], active: frozenset[Path] = frozenset()) -> list[str]:
    """The arguments with `@file` and `--options-file`/`-optf` files read in.

    Raises:
        NvccError: a file is missing, unreadable, unbalanced or includes itself.
    """
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if arg.startswith("@") and len(arg) > 1:
            out += _read_options_file(arg[1:], active)
        elif name in ("--options-file", "-optf"):
            if not eq:
                if i + 1 >= len(args):
                    raise NvccError(f"{name} needs a value")
                i += 1
                value = args[i]
            for path in filter(None, value.split(",")):
                out += _read_options_file(path, active)
        else:
            out.append(arg)
        i += 1
    return out


def _lookup(arg: str) -> tuple[_Option | None, str, str | None]:
    """The option an argument names, its spelling, and a value joined to it."""
    if arg.startswith("--"):
        name, eq, value = arg[2:].partition("=")
        return _LONG.get(name), arg.partition("=")[0], value if eq else None
    name, eq, value = arg[1:].partition("=")
    if name in _SHORT:
        return _SHORT[name], arg.partition("=")[0], value if eq else None
    for short in _JOINED:
        if arg[1:].startswith(short) and len(arg) > 2:
            return _SHORT[short], "-" + short, arg[2:]
    return None, arg.partition("=")[0], None


def _is_clang_spelling(arg: str) -> bool:
    return arg in _CLANG_FLAGS or arg.startswith(_CLANG_PREFIXES)


def _unknown(tr: Translation, arg: str) -> None:
    if tr.forward == "linker":
        tr.tail.append(("link", ["-Xlinker", arg]))
    elif tr.forward:
        tr.host.append([arg])
    else:
        raise NvccError(f"{arg.partition('=')[0]} is not an nvcc option; give host compiler "
                        f"options with -Xcompiler {arg}")


def read_command_line(argv: list[str]) -> Translation:
    """nvcc's arguments as clang's (`Translation.args`), or a `--help`/`--version` action.

    Raises:
        NvccError: an option has no clang equivalent, is not nvcc's, or has a bad value.
    """
    args = expand_options_files(argv)
    tr = Translation()
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "-" or not arg.startswith("-"):
            _input(tr, arg)
            continue
        option, spelling, value = _lookup(arg)
        if option is None:
            if _is_clang_spelling(arg):
                _clang_spelling(tr, arg)
            else:
                _unknown(tr, arg)
            continue
        if option.action == "werror":  # its value is optional: read here
            i = _werror(tr, args, i, value)
            continue
        if option.takes_value and value is None:
            if i >= len(args):
                raise NvccError(f"{spelling} needs a value")
            value = args[i]
            i += 1
        elif not option.takes_value and value is not None:
            raise NvccError(f"{spelling} takes no value (got {arg})")
        _apply(tr, option, spelling, value)
    return tr


def _input(tr: Translation, arg: str) -> None:
    if arg.endswith(_DEVICE_INPUTS):
        raise NvccError(f"{arg}: nvcc's device-code inputs (.ptx, .cubin, .fatbin) have no clang "
                        f"equivalent; build from the .cu source")
    tr.tail.append(("input", [arg]))


def _clang_spelling(tr: Translation, arg: str) -> None:
    if arg.startswith(("--cuda-gpu-arch=", "--offload-arch=")):
        if arg.partition("=")[2] != "native":  # as -arch=native: the default arch
            tr.archs.append(arg.partition("=")[2])
    elif arg == "-fgpu-rdc":
        tr.rdc = True
    elif arg == "-fno-gpu-rdc":
        tr.rdc = False
    elif arg.startswith("-Wl,"):
        tr.tail.append(("link", [arg]))
    else:
        tr.front.append(arg)


def _werror(tr: Translation, args: list[str], i: int, value: str | None) -> int:
    """nvcc's `-Werror KIND,...`; a bare `-Werror` (as CMake sends clang) is clang's."""
    if value is None and i < len(args) and all(k in _WERROR_KINDS for k in args[i].split(",")):
        value = args[i]
        i += 1
    if value is None:
        tr.front.append("-Werror")
        return i
    for kind in value.split(","):
        if kind not in _WERROR_KINDS:
            raise NvccError(f"-Werror={kind}: not a kind nvcc knows "
                            f"({', '.join(sorted(_WERROR_KINDS))})")
        if _WERROR_KINDS[kind]:
            tr.front.append(_WERROR_KINDS[kind])
    return i


# ----------------------------------------------------------------------------
# The actions


def _apply(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    kind, _, what = option.action.partition(":")
    if kind == "pass":
        tr.front += what.split()
    elif kind == "sep":
        tr.front += [what, value or ""]
    elif kind == "list":
        for item in _split(value):
            tr.front += [what, item]
    elif kind == "joined":
        tr.front.append(what + (value or ""))
    elif kind == "host":
        tr.host.append([what])
    elif kind == "set":
        name, eq, word = what.partition("=")
        setattr(tr, name, word if eq else True)
    elif kind == "error":
        advice = _ADVICE.get(option.name, "drop it")
        raise NvccError(f"{spelling} has no clang equivalent; {advice}")
    elif kind != "ignore":
        _HANDLERS[kind](tr, option, spelling, value)


def _split(value: str | None) -> list[str]:
    return [v for v in (value or "").split(",") if v]


def _bool(spelling: str, value: str | None) -> bool:
    if value not in ("true", "false"):
        raise NvccError(f"{spelling} {value}: expected true or false")
    return value == "true"


def _arch_value(spelling: str, value: str) -> tuple[str, str]:
    """(kind, number) of an arch name such as sm_90a or compute_80."""
    match = _ARCH.fullmatch(value)
    if not match:
        raise NvccError(f"{spelling}={value} is not a GPU architecture (e.g. sm_90, compute_90)")
    if match.group(1) == "lto":
        raise NvccError(f"{spelling}={value} has no clang equivalent; clang does not link-time "
                        f"optimise CUDA device code: name sm_{match.group(2)} instead")
    return match.group(1), match.group(2)


def _arch(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    assert value is not None
    if value == "native":
        return  # the default arch (MNEME_CUDA_ARCH, else sm_90) is chosen
    if value in ("all", "all-major"):
        archs = nvcc_identity.all_archs(major_only=value == "all-major")
        if not archs:
            raise NvccError(f"{spelling}={value}: the toolkit's nvcc cannot list its archs "
                            f"here; name the GPU archs (-arch=sm_90, or -gencode for several)")
        tr.archs += archs
        return
    _arch_value(spelling, value)
    tr.virtual_arch = value  # nvcc: the last -arch wins


def _code(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    for code in _split(value):
        _arch_value(spelling, code)
        tr.codes.append(code)


def _gencode(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    match = re.fullmatch(r"arch=([^,]+),code=(.+)", value or "")
    if not match:
        raise NvccError(f"{spelling} {value}: expected arch=compute_NN,code=sm_NN")
    _arch_value(spelling, match.group(1))
    codes = [c for c in re.split(r"[,\[\]\"' ]", match.group(2)) if c]
    if not codes:
        raise NvccError(f"{spelling} {value}: names no code")
    for code in codes:
        _, number = _arch_value(spelling, code)
        tr.archs.append(f"sm_{number}")


def _output(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    tr.output = value
    tr.front += ["-o", value or ""]


def _output_kind(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    tr.output_kind = option.name
    tr.front += ["--cuda-device-only", "-S" if option.name == "ptx" else "-c"]


def _device_c(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    tr.rdc = True
    tr.front.append("-c")


def _rdc(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    tr.rdc = _bool(spelling, value)


def _lib(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    tr.static_lib = True
    tr.front.append("--emit-static-lib")


def _library(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    tr.tail += [("link", [f"-l{name}"]) for name in _split(value)]


def _linker_options(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    for item in _split(value):
        tr.tail.append(("link", ["-Xlinker", item]))


def _compiler_options(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    """Host compiler options: one group per option, its separate value included."""
    for item in _split(value):
        if tr.host and tr.host[-1][-1] in invocation.TAKES_VALUE and len(tr.host[-1]) == 1:
            tr.host[-1].append(item)  # the value of `-Xcompiler -isystem,DIR`
        elif item == "-m64":
            continue  # every build is 64-bit (clang takes no -m64 for the host side alone)
        elif item == "-m32":
            raise NvccError(f"{spelling} -m32 has no clang equivalent; only 64-bit builds exist")
        else:
            tr.host.append([item])


def _cudart(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    if value not in ("none", "shared", "static"):
        raise NvccError(f"{spelling} {value}: expected none, shared or static")
    # The recorder interposes the shared runtime: static becomes shared.
    tr.cudart = "none" if value == "none" else "shared"


def _dopt(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    if value != "on":
        raise NvccError(f"{spelling} {value}: expected on")
    tr.device_opt = True


def _optimize(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    level = value or ""
    if level.isdigit():
        level = str(min(int(level), 3))
    elif level not in ("s", "z", "g"):
        raise NvccError(f"{spelling}{value}: expected an optimisation level (0 to 3)")
    tr.front.append(f"-O{level}")


def _language(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    if value not in _LANGUAGES:
        raise NvccError(f"{spelling} {value}: expected c, c++ or cu")
    tr.language = _LANGUAGES[value]


def _std(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    if not re.fullmatch(r"(c|gnu)\+\+(03|11|14|17|20|23)", value or ""):
        raise NvccError(f"{spelling} {value}: expected a C++ standard such as c++17")
    tr.front.append(f"-std={value}")


def _machine(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    if value != "64":
        raise NvccError(f"{spelling} {value} has no clang equivalent; only 64-bit builds exist")


def _maxrregcount(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    if not (value or "").isdigit():
        raise NvccError(f"{spelling} {value}: expected a number of registers")
    tr.front += ["-Xcuda-ptxas", f"--maxrregcount={value}"]


def _fp_switch(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    # An explicit switch wins over --use_fast_math wherever it stands, as in nvcc.
    tr.fp[option.name] = _bool(spelling, value)


def _default_stream(tr: Translation, option: _Option, spelling: str, value: str | None) -> None:
    streams = {"legacy": "legacy", "null": "legacy", "per-thread": "per-thread"}
    if value not in streams:
        raise NvccError(f"{spelling} {value}: expected legacy, null or per-thread")
    tr.front.append(f"-fgpu-default-stream={streams[value]}")


_HANDLERS = {
    "arch": _arch, "code": _code, "gencode": _gencode, "output": _output,
    "output_kind": _output_kind, "device_c": _device_c, "rdc": _rdc, "lib": _lib,
    "library": _library, "linker_options": _linker_options, "compiler_options": _compiler_options,
    "cudart": _cudart, "dopt": _dopt,
    "optimize": _optimize, "language": _language, "std": _std, "machine": _machine,
    "maxrregcount": _maxrregcount, "fp_switch": _fp_switch, "default_stream": _default_stream,
}


