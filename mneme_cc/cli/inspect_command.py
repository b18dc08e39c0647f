"""`mneme inspect FILE`: what device IR a binary, library or object carries."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli._errors import fail, reports_errors

#: Exit status when the file is readable but carries no device code at all.
EXIT_NO_IR = 1


def _codegen(module):
    """The module's recorded code-generation options (inferred for an older record)."""
    from mneme_cc.errors import BinaryFormatError
    from mneme_cc.replay.compiling.numerics import Codegen

    try:
        return Codegen.from_module(module.metadata, module.bitcode)
    except ValueError as exc:
        raise BinaryFormatError(f"{module.origin}: the module of {module.source}: {exc}") \
            from None


def _module_summary(module) -> dict:
    """The module's description without its bitcode (which --extract writes)."""
    summary = {k: v for k, v in dataclasses.asdict(module).items()
               if k not in ("bitcode", "metadata")}
    linked = {"linked": True, "linked_sources": module.metadata.get("linked_sources", [])} \
        if module.linked else {}
    return {**summary, "ir_bytes": module.ir_bytes, "codegen": _codegen(module).to_dict(),
            **linked}


def _file_names(modules) -> list[str]:
    """`<source-stem>.<arch>` per module: names read from the binary reduced to
    safe characters (they must not reach outside the directory), never clashing."""
    names, taken = [], set()
    for module in modules:
        kind = ".linked" if module.linked else ""
        stem = re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{Path(module.source).stem}{kind}.{module.arch}")
        stem = stem.lstrip(".") or "module"
        name, n = stem, 1
        while name in taken:
            n += 1
            name = f"{stem}.{n}"
        taken.add(name)
        names.append(name)
    return names


def _extract(modules, directory: Path) -> list[Path]:
    """Writes `<source-stem>.<arch>.bc` (+ `.json`) per module."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for module, name in zip(modules, _file_names(modules), strict=True):
        bc = directory / f"{name}.bc"
        bc.write_bytes(module.bitcode)
        (directory / f"{name}.json").write_text(json.dumps(_module_summary(module), indent=2) + "\n")
        written.append(bc)
    return written


def _write_ptx(modules, directory: Path) -> list[Path]:
    """Writes `<source-stem>.<arch>.ptx` per module: the whole module compiled
    as replay compiles it at the recorded settings."""
    from mneme_cc.errors import UsageError
    from mneme_cc.replay.compiling.jit import compile_ptx

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for module, name in zip(modules, _file_names(modules), strict=True):
        codegen = _codegen(module)
        try:
            result = compile_ptx(module.bitcode, None, codegen.baseline_config(), module.arch,
                                 codegen)
        except RuntimeError as exc:  # LLVM's: an unreadable module, an unknown arch
            raise UsageError(f"{module.origin}: cannot compile the module of {module.source} "
                             f"for {module.arch}: {str(exc).strip().splitlines()[-1]}") from None
        path = directory / f"{name}.ptx"
        path.write_text(result.ptx)
        written.append(path)
    return written


def _describe_codegen(codegen) -> str:
    parts = [f"-O{codegen.opt_level}", f"fp-contract={codegen.fp_contract}",
             f"denormals {codegen.denormals_f32}",
             "precise div" if codegen.prec_div else "approximate div",
             "precise sqrt" if codegen.prec_sqrt else "approximate sqrt"]
    parts += [name.replace("_", "-") for name in ("fast_math", "approx_func", "no_infs", "no_nans",
                                                  "no_signed_zeros", "reassociate")
              if getattr(codegen, name)]
    if codegen.approx_transcendentals:
        parts.append("approx-transcendentals")
    if codegen.source != "cc1":
        parts.append(f"(contraction read from the {codegen.source})")
    return ", ".join(parts)


def _render(file: Path, modules) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    # Every name here comes from the binary (paths, C++ names with brackets),
    # so none is read as Rich markup.
    console = Console()
    console.print(f"[bold]{escape(str(file))}[/]: {len(modules)} embedded device module(s)")
    for module in modules:
        console.print(f"\n[bold cyan]{escape(module.source)}[/] for [bold]{escape(module.arch)}[/] "
                      f"({module.ir_bytes} bytes of IR) in {escape(module.origin)}")
        if module.linked:
            sources = ", ".join(module.metadata.get("linked_sources", []))
            console.print(f"linked device module of {escape(sources)}", highlight=False)
        console.print(f"codegen: {_describe_codegen(_codegen(module))}", highlight=False)
        kernels = Table("kernel", "demangled", box=None, pad_edge=False)
        for k in module.kernels:
            kernels.add_row(escape(k.name), escape(k.demangled))
        console.print(kernels if module.kernels else "  no kernels")
        if module.globals:
            table = Table("device global", "size", "space", box=None, pad_edge=False)
            for g in module.globals:
                table.add_row(escape(g.demangled), str(g.size), escape(g.space))
            console.print(table)


def _image_kernels(images) -> list[dict]:
    """Per kernel, the archs of its cubins and its PTX across the fatbinaries."""
    from mneme_cc.drivers.fatbinary import demangle

    kernels: dict[str, dict[str, set[str]]] = {}
    for image in images:
        for name in image.kernels:
            kinds = kernels.setdefault(name, {"cubin": set(), "ptx": set()})
            kinds[image.kind].add(image.arch_name)
    names = sorted(kernels)
    by_arch = lambda archs: sorted(archs, key=lambda a: (int(a.rsplit("_", 1)[1]), a))  # noqa: E731
    return [{"name": name, "demangled": demangled, "cubin": by_arch(kernels[name]["cubin"]),
             "ptx": by_arch(kernels[name]["ptx"])}
            for name, demangled in zip(names, demangle(names), strict=True)]


def _image_summary(image) -> dict:
    return {"kind": image.kind, "arch": image.arch_name, "ptx_isa": image.ptx_isa or None,
            "bytes": len(image.payload) if image.payload is not None else None,
            "compressed_unread": image.payload is None, "kernels": list(image.kernels),
            "origin": image.origin}


def _render_images(file: Path, images, with_ir: bool) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    kernels = _image_kernels(images)
    if with_ir:
        console.print(f"\ndevice images: {len(images)} in its fatbinaries, "
                      f"{len(kernels)} kernel(s)", highlight=False)
        return
    console.print(f"[bold]{escape(str(file))}[/]: no embedded IR; {len(kernels)} kernel(s) in "
                  f"{len(images)} device image(s) of its fatbinaries", highlight=False)
    console.print("recordable and replayable with these images; tunable on their PTX "
                  "(ptxas options, launch geometry) or, with cubins only, on launch geometry",
                  highlight=False)
    table = Table("kernel", "demangled", "cubin", "ptx", box=None, pad_edge=False)
    for k in kernels:
        table.add_row(escape(k["name"]), escape(k["demangled"]), ", ".join(k["cubin"]) or "-",
                      ", ".join(k["ptx"]) or "-")
    console.print(table)
    unread = sum(1 for i in images if i.payload is None)
    if unread:
        console.print(f"{unread} entr(ies) use a compression this reader does not read "
                      "(CUDA before 12.8); their kernels are not listed", highlight=False)


@reports_errors
def inspect(
    file: Annotated[Path, typer.Argument(help="Executable, shared library, object or static library.")],
    extract: Annotated[Optional[Path], typer.Option("--extract", metavar="DIR",
                       help="Write each module's bitcode (.bc) and metadata (.json) to DIR.")] = None,
    ptx: Annotated[Optional[Path], typer.Option("--ptx", metavar="DIR",
                   help="Write each module's PTX as replay compiles it at the recorded "
                        "settings (no GPU needed).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """List the device modules, kernels and globals a file carries, and the
    PTX and cubins of its fatbinaries (what an nvcc build carries)."""
    from mneme_cc.drivers.embedded import read_embedded_modules
    from mneme_cc.drivers.fatbinary import read_device_images

    if not file.exists():
        fail(f"{file} does not exist")
    if file.is_dir():
        fail(f"{file} is a directory; give a binary, library or object")
    modules = read_embedded_modules(file)
    images = read_device_images(file)
    written = _extract(modules, extract) if extract and modules else []
    written += _write_ptx(modules, ptx) if ptx and modules else []
    if as_json:
        print(json.dumps({"file": str(file), "modules": [_module_summary(m) for m in modules],
                          "images": [_image_summary(i) for i in images],
                          "image_kernels": _image_kernels(images),
                          "extracted": [str(p) for p in written]}, indent=2))
    else:
        if modules:
            _render(file, modules)
        if images:
            _render_images(file, images, bool(modules))
        for path in written:
            print(f"wrote {path}")
    if not modules and not images:
        if not as_json:
            print(f"mneme: {file} carries no embedded IR and no device images "
                  "(was it built with mneme-cc or nvcc?)")
        raise typer.Exit(EXIT_NO_IR)
