"""A one-command build of relocatable device code, split into compiles and a link.

`mneme-cxx -fgpu-rdc a.cu b.cu -o app` would leave its objects in clang's
temporary files, out of reach of the IR link. So the driver compiles each
source into a scratch directory itself, with the command's own options,
and then links those objects with the same command line, where the link
finds their IR as in a build with separate compiles.  Response files are
read first; `-x LANG` goes to the compiles of the sources it applies to
and not to the link, whose inputs are objects.
"""

from __future__ import annotations

from pathlib import Path

_SOURCE_SUFFIXES = (".cu", ".c", ".cc", ".cpp", ".cxx", ".C", ".c++")
_LANGUAGE_OPTIONS = ("-x", "--language")


def _language_option(args: list[str], i: int) -> tuple[str | None, int] | None:
    """(the language, or None for `none`; how many arguments it takes) when
    args[i] sets the language of the inputs after it."""
    arg = args[i]
    if arg in _LANGUAGE_OPTIONS:
        value, width = (args[i + 1] if i + 1 < len(args) else "none"), 2
    elif arg.startswith("--language="):
        value, width = arg[len("--language="):], 1
    elif arg.startswith("-x") and len(arg) > 2:
        value, width = arg[2:], 1
    else:
        return None
    return (None if value == "none" else value), width


def _sources(args: list[str], inputs: list[str]) -> dict[str, str | None]:
    """Each source among the inputs, with the language `-x` gives it (None: its suffix's)."""
    every_input = set(inputs)
    sources: dict[str, str | None] = {}
    language = None
    i = 0
    while i < len(args):
        option = _language_option(args, i)
        if option is not None:
            language, width = option
            i += width
            continue
        arg = args[i]
        if arg in every_input and (language is not None or arg.endswith(_SOURCE_SUFFIXES)):
            sources.setdefault(arg, language)
        i += 1
    return sources


def splittable(args: list[str], inputs: list[str], cuda_inputs: list[str], links: bool) -> bool:
    """True for a compile-and-link of relocatable device code (`args` with
    response files read)."""
    return (links and bool(cuda_inputs) and "-fgpu-rdc" in args and "-" not in inputs
            and bool(_sources(args, inputs)))


def split(args: list[str], inputs: list[str], takes_value: frozenset[str],
          scratch: Path) -> tuple[list[list[str]], list[str]]:
    """(the argument list of each source's compile, the link's arguments)."""
    sources = _sources(args, inputs)
    objects = {src: str(scratch / f"{n}-{Path(src).stem}.o") for n, src in enumerate(sources)}
    every_input = set(inputs)
    common: list[str] = []
    link: list[str] = []
    i = 0
    while i < len(args):
        option = _language_option(args, i)
        if option is not None:
            i += option[1]
            continue
        arg = args[i]
        if arg in takes_value and i + 1 < len(args):
            if arg != "-o":
                common += args[i:i + 2]
            link += args[i:i + 2]
            i += 2
            continue
        if arg not in every_input and not (arg.startswith("-o") and len(arg) > 2):
            common.append(arg)
        link.append(objects.get(arg, arg))
        i += 1
    # The link options mean nothing to a compile, the compile options nothing
    # to the link: clang would warn about each.
    compiles = [[*common, "-Qunused-arguments", "-c",
                 *(["-x", language] if language else []), src, "-o", objects[src]]
                for src, language in sources.items()]
    return compiles, link + ["-Qunused-arguments"]
