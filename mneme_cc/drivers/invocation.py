"""What a clang command line asks for, as far as the drivers care: its
inputs, whether it links, and the settings the drivers would otherwise add."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mneme_cc.errors import MnemeError

# Options whose value is the next argument, so that value is not an input.
TAKES_VALUE = frozenset("""
    -o -x -I -D -U -include -imacros -isystem -idirafter -iquote -iprefix
    -iwithprefix -iwithprefixbefore -isysroot --sysroot -MF -MT -MQ -MJ -Xclang
    -Xlinker -Xassembler -Xpreprocessor -mllvm -L -l -target -arch -T -z -u -e
    -Xcuda-ptxas -Xcuda-fatbinary -Xarch_device -Xarch_host -Xoffload-linker
    -working-directory -ivfsoverlay -include-pch -dependency-file -F -rpath --language
    --param -aux-triple --serialize-diagnostics -Xopenmp-target
""".split())

# Any of these means "do not link".
_NO_LINK = frozenset("-c -S -E -M -MM -fsyntax-only --precompile --cuda-device-only".split())

# These only preprocess, so no IR is made and no plugin is needed.
_PREPROCESS_ONLY = frozenset("-E -M -MM".split())

_CUDA_SUFFIXES = (".cu",)
OBJECT_SUFFIXES = (".o", ".obj", ".a", ".lo")


@dataclass
class Invocation:
    """What one command line asks clang to do, as far as mneme cares."""

    args: list[str]
    inputs: list[str] = field(default_factory=list)
    cuda_inputs: list[str] = field(default_factory=list)
    links: bool = False
    preprocess_only: bool = False
    names_arch: bool = False
    archs: list[str] = field(default_factory=list)  # --cuda-gpu-arch / --offload-arch values
    names_cuda_feature: bool = False
    names_cuda_path: bool = False
    names_plugin: bool = False
    names_cudart: bool = False
    output: str | None = None
    expanded_args: list[str] = field(default_factory=list)  # with response files read


def _expand_response_files(args: list[str], active: frozenset[Path] = frozenset()) -> list[str]:
    """Arguments with `@file` read, nested ones too (for analysis only; clang
    gets the original and reports its own errors, a file that includes
    itself among them)."""
    import shlex

    out: list[str] = []
    for arg in args:
        path = Path(arg[1:]).resolve() if arg.startswith("@") else None
        if path is not None and path.is_file() and path not in active:
            try:
                inner = shlex.split(path.read_text(errors="replace"))
            except ValueError as exc:  # an unbalanced quote
                raise MnemeError(f"response file {arg[1:]}: {exc}") from None
            out.extend(_expand_response_files(inner, active | {path}))
        else:
            out.append(arg)
    return out


def analyse(args: list[str]) -> Invocation:
    """What `args` (a clang command line) asks for; response files are read."""
    inv = Invocation(args=list(args))
    expanded = _expand_response_files(args)
    language = None
    no_link = False
    i = 0
    while i < len(expanded):
        arg = expanded[i]
        value = None
        if arg in TAKES_VALUE and i + 1 < len(expanded):
            value = expanded[i + 1]
            i += 1
        i += 1
        if arg in ("-x", "--language"):
            language = None if value == "none" else value
        elif arg.startswith("-x") and len(arg) > 2:
            language = None if arg[2:] == "none" else arg[2:]
        elif arg.startswith("--language="):
            language = None if arg[11:] == "none" else arg[11:]
        if arg in ("-lcudart", "-lcudart_static") or arg.endswith("libcudart_static.a") or (
                arg == "-l" and value in ("cudart", "cudart_static")):
            inv.names_cudart = True
        if arg == "-o" and value is not None:
            inv.output = value
        elif arg.startswith("-o") and len(arg) > 2:
            inv.output = arg[2:]
        if value is not None:
            continue
        if arg in _NO_LINK:
            no_link = True
        if arg in _PREPROCESS_ONLY:
            inv.preprocess_only = True
        if arg.startswith(("--cuda-gpu-arch=", "--offload-arch=")) or arg == "--no-offload-arch=all":
            inv.names_arch = True
            inv.archs += arg.partition("=")[2].split(",")
        elif arg.startswith("--cuda-feature="):
            inv.names_cuda_feature = True
        elif arg.startswith("--cuda-path="):
            inv.names_cuda_path = True
        elif arg.startswith("-fpass-plugin=") and "MnemePasses" in arg:
            inv.names_plugin = True
        if arg == "-" or not arg.startswith("-"):
            inv.inputs.append(arg)
            if language == "cuda" or (language is None and arg.endswith(_CUDA_SUFFIXES)):
                inv.cuda_inputs.append(arg)
    inv.links = bool(inv.inputs) and not no_link
    inv.expanded_args = expanded
    return inv
