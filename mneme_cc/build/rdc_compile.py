"""A one-command build of relocatable device code, split into compiles and a link.

`mneme-cxx -fgpu-rdc a.cu b.cu -o app` would leave its objects in clang's
temporary files, out of reach of the IR link. So the driver compiles each
source into a scratch directory itself, with the command's own options,
and then links those objects with the same command line, where the link
finds their IR as in a build with separate compiles.
"""

from __future__ import annotations

from pathlib import Path

_SOURCE_SUFFIXES = (".cu", ".c", ".cc", ".cpp", ".cxx", ".C", ".c++")


def _sources(inputs: list[str]) -> list[str]:
    return [p for p in inputs if p.endswith(_SOURCE_SUFFIXES)]


def splittable(args: list[str], inputs: list[str], cuda_inputs: list[str], links: bool) -> bool:
    """True for a compile-and-link of relocatable device code written out on
    the command line (not in response files, no `-x` that would apply to the
    objects as well)."""
    sources = _sources(inputs)
    return (links and bool(cuda_inputs) and "-fgpu-rdc" in args and bool(sources)
            and all(s in args for s in sources) and "-" not in inputs
            and not any(a.startswith(("-x", "--language")) for a in args))


def split(args: list[str], inputs: list[str], takes_value: frozenset[str],
          scratch: Path) -> tuple[list[list[str]], list[str]]:
    """(the argument list of each source's compile, the link's arguments)."""
    objects = {src: str(scratch / f"{n}-{Path(src).stem}.o")
               for n, src in enumerate(_sources(inputs))}
    every_input = set(inputs)
    common: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in takes_value and i + 1 < len(args):
            if arg != "-o":
                common += args[i:i + 2]
            i += 2
            continue
        if arg not in every_input and not (arg.startswith("-o") and len(arg) > 2):
            common.append(arg)
        i += 1
    # The link options mean nothing to a compile, the compile options nothing
    # to the link: clang would warn about each.
    compiles = [[*common, "-Qunused-arguments", "-c", src, "-o", obj]
                for src, obj in objects.items()]
    link = [objects.get(a, a) for a in args] + ["-Qunused-arguments"]
    return compiles, link
