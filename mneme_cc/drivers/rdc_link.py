"""The IR link for relocatable device code (docs/embedded-ir.md, *The linked module*).

With `-fgpu-rdc` every object carries its own TU's device IR, in which the
`__device__` functions and `extern __device__` variables of other TUs are
only declarations.  clang links the device code at the program's link; the
driver does the same for the IR: the modules of every object, and of the
archive members the device link needs, become one module per GPU arch,
marked `linked`, embedded through one generated object added to the link.
The recorder takes the linked module over a TU's own for the kernels it
defines, so a kernel that calls into another TU replays.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mneme_cc.drivers.elf import Member, elf_members, section_names_and_data
from mneme_cc.drivers.embedded import SECTION, EmbeddedModule, decode_records
from mneme_cc.errors import BinaryFormatError, MnemeError

#: The section clang's offload driver puts device code in: what marks an
#: object as relocatable device code.
OFFLOAD_SECTION = ".llvm.offloading"

# Linkages whose definitions another module cannot resolve against.
_LOCAL_LINKAGES = frozenset(("internal", "private", "available_externally"))


@dataclass
class Unit:
    """The device modules of one object or archive member, one per arch."""

    origin: str
    from_archive: bool
    modules: list[EmbeddedModule]


def _units_in(path: str) -> list[Unit]:
    """The relocatable-device-code objects in one input (object or archive)."""
    try:
        members = elf_members(path)
    except (BinaryFormatError, OSError):
        return []  # not ours to diagnose: the linker will
    archive = len(members) != 1 or members[0].name != path
    units = []
    for member in members:
        sections = dict(_sections(member))
        if OFFLOAD_SECTION in sections and SECTION in sections:
            units.append(Unit(member.name, archive,
                              decode_records(bytes(sections[SECTION]), member.name)))
    return units


def _sections(member: Member):
    try:
        yield from section_names_and_data(member)
    except BinaryFormatError:
        return


def _find_library(name: str, dirs: list[str], static: bool) -> str | None:
    """What `-lNAME` names, searched as the linker searches (shared first)."""
    names = [name[1:]] if name.startswith(":") else (
        [f"lib{name}.a"] if static else [f"lib{name}.so", f"lib{name}.a"])
    for directory in dirs:
        for candidate in names:
            if (Path(directory) / candidate).is_file():
                return str(Path(directory) / candidate)
    return None


def _library_search(args: list[str]) -> tuple[list[str], bool]:
    """(the -L directories, whether -static) of a link's arguments."""
    dirs = [a[2:] for a in args if a.startswith("-L") and len(a) > 2]
    dirs += [v for a, v in zip(args, args[1:], strict=False) if a == "-L"]
    return dirs, "-static" in args


def link_inputs(args: list[str], inputs: list[str]) -> list[str]:
    """The objects and archives of a link, `-l` libraries resolved, in order.

    A file named twice (`-lphysics -lphysics`, as CMake and Makefiles write
    link lines) is listed once: a second copy of its IR would define every
    symbol twice.
    """
    dirs, static = _library_search(args)
    out = [p for p in inputs if not p.startswith("-")]
    out += [found for i, arg in enumerate(args)
            if arg.startswith("-l") and (found := _archive_at(args, i, dirs, static))]
    unique: dict[str, str] = {}
    for path in out:
        unique.setdefault(os.path.realpath(path), path)
    return list(unique.values())


_GROUP_MARKS = frozenset(("-Wl,--start-group", "-Wl,-(", "-Wl,--end-group", "-Wl,-)"))


def _archive_at(args: list[str], i: int, dirs: list[str], static: bool) -> str | None:
    """The real path of the static library that args[i] names, if it names one."""
    arg = args[i]
    if arg.startswith("-l") and len(arg) > 2:
        found = _find_library(arg[2:], dirs, static)
    elif arg == "-l" and i + 1 < len(args):
        found = _find_library(args[i + 1], dirs, static)
    else:
        found = arg if arg.endswith(".a") and not arg.startswith("-") else None
    return os.path.realpath(found) if found and found.endswith(".a") else None


def without_repeated_archives(args: list[str]) -> list[str]:
    """A link's arguments with each static library named once.

    clang 22's device link extracts an archive's device code at every
    mention, so `-lphysics -lphysics` (which CMake and Makefiles write to
    resolve the host's cycles) defines each device symbol twice.  A repeat
    is dropped; without a group of the user's, the stretch from the first
    mention to the last becomes one `--start-group`, which the host linker
    searches as often as the repeats would have.
    """
    dirs, static = _library_search(args)
    mentions: dict[str, list[int]] = {}
    for i in range(len(args)):
        archive = _archive_at(args, i, dirs, static)
        if archive is not None and not (i > 0 and args[i - 1] == "-l" and args[i] != "-l"):
            mentions.setdefault(archive, []).append(i)
    repeats = {i for at in mentions.values() for i in at[1:]}
    if not repeats:
        return list(args)
    grouped = any(a in _GROUP_MARKS for a in args)
    start = min(at[0] for at in mentions.values() if len(at) > 1)
    end = max(repeats)
    out: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if not grouped and i == start:
            out.append("-Wl,--start-group")
        if i in repeats:
            skip = arg == "-l"
        else:
            out.append(arg)
        if not grouped and i == end:
            out.append("-Wl,--end-group")
    return out


def rdc_units(paths: list[str]) -> list[Unit]:
    """Every relocatable-device-code object among the link's inputs."""
    return [unit for path in paths if Path(path).is_file() for unit in _units_in(path)]


def archived_kernel_archs(units: list[Unit]) -> list[str]:
    """The GPU archs of the kernels that archive members define.

    clang 22's device link takes an archive member only for a device symbol
    that other device code leaves undefined, never for a kernel that only
    host code launches (a CUDA library linked into a C++ program); the
    driver has it take every member of these archs (`--should-extract`).
    """
    return sorted({m.arch for unit in units if unit.from_archive
                   for m in unit.modules if m.kernels})


def _parse(module: EmbeddedModule):
    """The record's bitcode as an llvmlite module.

    Raises:
        MnemeError: this LLVM cannot read it.
    """
    import llvmlite.binding as llvm

    try:
        return llvm.parse_bitcode(module.bitcode)
    except RuntimeError as exc:
        detail = (str(exc).strip().splitlines() or ["unreadable"])[0]
        raise MnemeError(f"{module.origin}: the device IR of {module.source} cannot be "
                         f"read ({detail}); rebuild it with this mneme-cc") from None


def _symbols(module) -> tuple[set[str], set[str]]:
    """(defined, undefined) external symbols of an llvmlite module."""
    defined, undefined = set(), set()
    for value in [*module.functions, *module.global_variables]:
        if value.name.startswith("llvm."):
            continue
        if value.is_declaration:
            undefined.add(value.name)
        elif str(value.linkage).split(".")[-1] not in _LOCAL_LINKAGES:
            defined.add(value.name)
    return defined, undefined


def select(units: list[Unit], arch: str) -> list[EmbeddedModule]:
    """The modules for `arch` that the device link takes, in link order.

    Objects always; an archive member as a linker pulls one: when it
    defines a kernel (the host side may launch it) or a symbol the modules
    taken so far need, and never when everything it defines is defined
    already (the same member in two archives).
    """
    candidates = []
    for unit in units:
        for module in unit.modules:
            if module.arch == arch:
                defined, undefined = _symbols(_parse(module))
                candidates.append((unit.from_archive, module, defined, undefined))
    taken = [c for c in candidates if not c[0]]
    rest = [c for c in candidates if c[0]]
    have: set[str] = set().union(*(c[2] for c in taken))
    need: set[str] = set().union(*(c[3] for c in taken)) - have
    while True:
        pulled = next((c for c in rest if not c[2] <= have and (c[1].kernels or c[2] & need)),
                      None)
        if pulled is None:
            return [c[1] for c in taken]
        taken.append(pulled)
        rest.remove(pulled)
        have |= pulled[2]
        need = (need | pulled[3]) - have


def _union(modules: list[EmbeddedModule], key: str) -> list[dict]:
    seen: dict[str, dict] = {}
    for module in modules:
        for entry in module.metadata.get(key, []):
            seen.setdefault(entry["name"], entry)
    return list(seen.values())


def _codegen(modules: list[EmbeddedModule], output: str) -> dict:
    """The TUs' code-generation options, which should agree."""
    first = modules[0].metadata.get("codegen", {})
    differing = sorted({m.source for m in modules if m.metadata.get("codegen", {}) != first})
    if differing:
        print(f"mneme: warning: {', '.join(differing)} compiled with other floating-point "
              f"options than {modules[0].source}; the linked device module of {output} "
              f"replays with the latter's", file=sys.stderr)
    return first


def link_arch(modules: list[EmbeddedModule], output: str) -> bytes:
    """One encoded record: the modules linked, described as the plugin does.

    Raises:
        MnemeError: LLVM cannot link the modules.
    """
    import llvmlite.binding as llvm

    from mneme_cc import __version__, _native

    linked = _parse(modules[0])
    for module in modules[1:]:
        try:
            linked.link_in(_parse(module))
        except RuntimeError as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else "link failed"
            raise MnemeError(f"linking the device IR of {module.origin}: {message}") from None
    bitcode = linked.as_bitcode()
    first = modules[0].metadata
    features = next((m.target_features for m in modules if m.target_features), "")
    metadata = {
        "arch": first["arch"], "target_features": features,
        "triple": first["triple"], "source": Path(output).name,
        "kernels": _union(modules, "kernels"), "globals": _union(modules, "globals"),
        "o0_attributes_removed": any(m.metadata.get("o0_attributes_removed") for m in modules),
        "codegen": _codegen(modules, output), "ir_bytes": len(bitcode),
        "linked": True, "linked_sources": [m.source for m in modules],
        "producer": f"mneme-cc {__version__} IR link (LLVM "
                    f"{'.'.join(map(str, llvm.llvm_version_info))})",
    }
    text = json.dumps(metadata, sort_keys=True, separators=(",", ":"))
    return bytes(_native.encode_embedded_ir(text, bitcode))


_EMBED_SOURCE = """\
__asm__(".pushsection {section},\\"aR\\",@progbits\\n.balign 8\\n"
        "__mneme_linked_ir:\\n.incbin \\"{blob}\\"\\n__mneme_linked_ir_end:\\n.popsection\\n");
extern void *dlsym(void *, const char *);
__attribute__((visibility("hidden"))) extern const char __mneme_linked_ir[];
__attribute__((visibility("hidden"))) extern const char __mneme_linked_ir_end[];
/* Before default-priority constructors, as the plugin's own registration. */
__attribute__((constructor(101))) static void __mneme_register_linked_ir(void) {{
  void (*hook)(const void *, unsigned long long) =
      (void (*)(const void *, unsigned long long))dlsym((void *)0, "{hook}");
  if (hook)
    hook(__mneme_linked_ir, (unsigned long long)(__mneme_linked_ir_end - __mneme_linked_ir));
}}
"""


def embed_object(records: bytes, clang: str, scratch: Path, target_flags: list[str]) -> Path:
    """An object that carries `records` in `.mneme_ir` and registers them,
    compiled for the link's target (`target_flags`: its --target, -m, --sysroot).

    Raises:
        MnemeError: clang cannot compile it.
    """
    from mneme_cc import _native

    blob = scratch / "linked.mnir"
    blob.write_bytes(records)
    source = scratch / "linked_ir.c"
    source.write_text(_EMBED_SOURCE.format(section=_native.EMBEDDED_IR_SECTION,
                                           blob=blob, hook=_native.EMBEDDED_IR_HOOK))
    obj = scratch / "linked_ir.o"
    command = [clang, *target_flags, "-c", "-x", "c", "-O1", "-fPIC", str(source), "-o", str(obj)]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or ["no output"])[0]
        raise MnemeError(f"cannot compile the linked device IR ({shlex.join(command)}): {detail}")
    return obj


def linked_ir_object(units: list[Unit], output: str, clang: str, scratch: Path,
                     target_flags: list[str] | None = None) -> Path | None:
    """The object to add to a link of relocatable device code (the link's
    `rdc_units`), or None.

    When LLVM cannot link the modules (a symbol defined twice that the
    device link tolerates), the link goes on without a linked module, with
    a one-line warning: the program builds as it would with clang.

    Raises:
        MnemeError: a module cannot be read, or the linked IR cannot be embedded.
    """
    if not units:
        return None
    archs = sorted({m.arch for unit in units for m in unit.modules})
    chosen = [modules for modules in (select(units, arch) for arch in archs) if modules]
    if not chosen:
        return None
    try:
        records = b"".join(link_arch(modules, output) for modules in chosen)
    except MnemeError as exc:
        print(f"mneme: warning: {exc}; {Path(output).name} gets no linked device module, "
              f"so a kernel that calls into another file replays with its own kernel only",
              file=sys.stderr)
        return None
    return embed_object(records, clang, scratch, target_flags or [])
