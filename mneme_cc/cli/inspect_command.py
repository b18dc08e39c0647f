"""`mneme inspect FILE`: what device IR a binary, library or object carries."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli._errors import fail, reports_errors

#: Exit status when the file is readable but carries no embedded IR.
EXIT_NO_IR = 1


def _module_summary(module) -> dict:
    """The module's description without its bitcode (which --extract writes)."""
    summary = {k: v for k, v in dataclasses.asdict(module).items()
               if k not in ("bitcode", "metadata")}
    return {**summary, "ir_bytes": module.ir_bytes}


def _extract(modules, directory: Path) -> list[Path]:
    """Writes `<source-stem>.<arch>.bc` (+ `.json`) per module; names never clash."""
    directory.mkdir(parents=True, exist_ok=True)
    written, taken = [], set()
    for module in modules:
        stem = f"{Path(module.source).stem}.{module.arch}"
        name, n = stem, 1
        while name in taken:
            n += 1
            name = f"{stem}.{n}"
        taken.add(name)
        bc = directory / f"{name}.bc"
        bc.write_bytes(module.bitcode)
        (directory / f"{name}.json").write_text(json.dumps(_module_summary(module), indent=2) + "\n")
        written.append(bc)
    return written


def _render(file: Path, modules) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{file}[/]: {len(modules)} embedded device module(s)")
    for module in modules:
        console.print(f"\n[bold cyan]{module.source}[/] for [bold]{module.arch}[/] "
                      f"({module.ir_bytes} bytes of IR) in {module.origin}")
        kernels = Table("kernel", "demangled", box=None, pad_edge=False)
        for k in module.kernels:
            kernels.add_row(k.name, k.demangled)
        console.print(kernels if module.kernels else "  no kernels")
        if module.globals:
            table = Table("device global", "size", "space", box=None, pad_edge=False)
            for g in module.globals:
                table.add_row(g.demangled, str(g.size), g.space)
            console.print(table)


@reports_errors
def inspect(
    file: Annotated[Path, typer.Argument(help="Executable, shared library, object or static library.")],
    extract: Annotated[Optional[Path], typer.Option("--extract", metavar="DIR",
                       help="Write each module's bitcode (.bc) and metadata (.json) to DIR.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """List the device modules, kernels and globals a file carries."""
    from mneme_cc.embedded import read_embedded_modules

    if not file.exists():
        fail(f"{file} does not exist")
    if file.is_dir():
        fail(f"{file} is a directory; give a binary, library or object")
    modules = read_embedded_modules(file)
    written = _extract(modules, extract) if extract and modules else []
    if as_json:
        print(json.dumps({"file": str(file), "modules": [_module_summary(m) for m in modules],
                          "extracted": [str(p) for p in written]}, indent=2))
    elif modules:
        _render(file, modules)
        for path in written:
            print(f"wrote {path}")
    if not modules:
        if not as_json:
            print(f"mneme: {file} carries no embedded IR (was it built with mneme-cc?)")
        raise typer.Exit(EXIT_NO_IR)
