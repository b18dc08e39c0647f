"""A recorded kernel compiled under a ReplayConfig, through a disk cache.

The cache keeps two stages apart. A PTX entry's key covers what LLVM reads:
the IR's content hash, the kernel, the compile fields of the grounded
config but ptxas's own (`PTXAS_ONLY`), the build's recorded
code-generation options, the launch dimensions and argument bytes where
they are specialised, the arch, and the versions of mneme-cc, LLVM
(llvmlite) and nvJitLink. A cubin entry's key covers what ptxas reads: the
PTX's digest, ptxas's options and which ptxas assembles
(replay/compiling/assembler.py). So a study's configurations that differ
only in ptxas's options run LLVM once, and those whose LLVM settings give
the same PTX run ptxas once. Entries are written to a temporary name and
renamed, so concurrent compilers share one cache.

`compile_instance` compiles a recorded instance's kernel; it needs no GPU,
so compile workers import this module and not the replay session."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mneme_cc.replay.compiling.assembler import Assembler, assembler_for, image_ptxas_version
from mneme_cc.replay.compiling.cubin import Resources, compile_cubin, ptxas_flags
from mneme_cc.replay.compiling.jit import KernelLaunch, compile_ptx
from mneme_cc.replay.compiling.numerics import Codegen, codegen_of
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.running.cuda_bindings import cuda_bindings

if TYPE_CHECKING:
    from mneme_cc.record.db import Instance


@dataclass
class CompiledKernel:
    cubin: bytes
    ptx: str
    resources: Resources
    seconds: dict[str, float] = field(default_factory=dict)  # per stage; empty on a hit
    cache_hit: bool = False
    # The module after the transforms and the pipeline: its text, or (from
    # the cache) the file holding it, read only when asked for.
    ir_text: str | None = None
    ir_file: Path | None = None
    assembler: str = ""        # "ptxas 13.0.88" or "nvJitLink 13.5"

    @property
    def ir(self) -> str:
        if self.ir_text is None:
            self.ir_text = self.ir_file.read_text() if self.ir_file else ""
        return self.ir_text


_NO_RESOURCES = Resources(0, 0, 0, 0, 0, 0)  # a PTX entry's: only a cubin has resources


def default_cache_dir() -> Path:
    if os.environ.get("MNEME_CACHE_DIR"):
        return Path(os.environ["MNEME_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mneme-cc" / "jit"


@functools.cache
def _toolchain_versions() -> dict[str, str]:
    import llvmlite
    import llvmlite.binding as llvm

    from mneme_cc.build_info import build_info

    versions = {"mneme-cc": build_info().version, "llvmlite": llvmlite.__version__,
                "llvm": ".".join(map(str, llvm.llvm_version_info))}
    try:
        versions["nvjitlink"] = ".".join(map(str, cuda_bindings("nvjitlink").version()))
    except Exception:  # noqa: BLE001 - absent: compile_cubin will say so
        versions["nvjitlink"] = "absent"
    return versions


#: What only ptxas reads, at fixed values: configurations that differ in these
#: alone share their PTX, and LLVM runs once for all of them.
PTXAS_ONLY = {"ptxas_opt_level": 3, "max_registers": None}


def ptx_key(ir_hash: str, launch: KernelLaunch, config: ReplayConfig, arch: str,
            codegen: Codegen) -> str:
    """The key of config's PTX: what LLVM reads (PTXAS_ONLY left out)."""
    grounded = dataclasses.replace(config, **PTXAS_ONLY).grounded()
    grid, block = grounded.grid or launch.grid, grounded.block or launch.block
    specialised = {str(i): launch.args[o:o + s].hex()
                   for i, (o, s) in enumerate(launch.params) if i in grounded.specialize_args}
    material = {
        "stage": "ptx", "ir": ir_hash, "kernel": launch.name, "arch": arch,
        "config": grounded.compile_fields(), "codegen": codegen.to_dict(),
        "dims": [grid, block] if grounded.specialize_dims or grounded.launch_bounds else None,
        "args": specialised, "versions": _toolchain_versions(),
    }
    return _digest(json.dumps(material, sort_keys=True).encode())


def cubin_key(ptx: str, kernel: str, config: ReplayConfig, arch: str, assembler: str) -> str:
    """The key of the cubin of `ptx`: what ptxas reads. Configurations whose
    LLVM settings differ but give the same PTX share it."""
    material = {"stage": "cubin", "ptx": _digest(ptx.encode()), "kernel": kernel, "arch": arch,
                "ptxas": ptxas_flags(config), "versions": _toolchain_versions(),
                "assembler": assembler}
    return _digest(json.dumps(material, sort_keys=True).encode())


def default_assembler(wanted: str | None = None) -> Assembler:
    """The ptxas of version `wanted` where installed, else nvJitLink."""
    return assembler_for(wanted, _toolchain_versions()["nvjitlink"])


class NotCompiled(LookupError):
    """Asked for what the cache holds only (`cached_only`), and it holds no entry."""


def compile_kernel(bitcode: bytes, ir_hash: str, launch: KernelLaunch, config: ReplayConfig,
                   arch: str, codegen: Codegen, cache_dir: Path | None = None,
                   assembler: Assembler | None = None,
                   cached_only: bool = False) -> CompiledKernel:
    """Compiles (or finds in the cache) the kernel as config says, for arch,
    from the IR of a build with the code-generation options `codegen`: its
    PTX, then its cubin, each through the cache on its own. `cached_only`:
    raises NotCompiled rather than compile what the cache lacks."""
    assembler = assembler or default_assembler()
    root = _cache_root(cache_dir)
    llvm_config = dataclasses.replace(config, **PTXAS_ONLY)

    def lower() -> CompiledKernel:
        jit = compile_ptx(bitcode, launch, llvm_config, arch, codegen)
        return CompiledKernel(b"", jit.ptx, _NO_RESOURCES, jit.seconds, ir_text=jit.ir)

    def assemble() -> CompiledKernel:
        cubin = compile_cubin(lowered.ptx, launch.name, config, arch, assembler.path)
        return CompiledKernel(cubin.data, "", cubin.resources, {"ptxas": cubin.seconds},
                              ir_text="")

    lowered = _through_cache(root, ptx_key(ir_hash, launch, config, arch, codegen),
                             None if cached_only else lower)
    assembled = _through_cache(root, cubin_key(lowered.ptx, launch.name, config, arch,
                                               assembler.name), None if cached_only else assemble)
    return CompiledKernel(assembled.cubin, lowered.ptx, assembled.resources,
                          {**lowered.seconds, **assembled.seconds},
                          lowered.cache_hit and assembled.cache_hit, lowered.ir_text,
                          lowered.ir_file, assembler.name)


def _cache_root(cache_dir: Path | str | None) -> Path:
    return Path(cache_dir) if cache_dir else default_cache_dir()


def _through_cache(root: Path, key: str, build) -> CompiledKernel:
    """The cache's entry for key, or build()'s result, stored there (no build:
    NotCompiled)."""
    entry = root / key[:2] / key
    cached = _load(entry)
    if cached is not None:
        return cached
    if build is None:
        raise NotCompiled(key)
    compiled = build()
    _store(entry, compiled)
    return compiled


def application_assembler(kernel) -> Assembler:
    """The assembler for a recorded kernel: its application's ptxas where that
    is known and installed (read once per kernel)."""
    cached = getattr(kernel, "_assembler", None)
    if cached is None:
        try:
            image = kernel.image()
        except Exception:  # noqa: BLE001 - an unreadable image is reported where it is used
            image = None
        cached = kernel._assembler = default_assembler(image_ptxas_version(image))
    return cached


def compile_instance(inst: Instance, config: ReplayConfig, arch: str,
                     cache_dir=None, cached_only: bool = False) -> CompiledKernel:
    """The instance's kernel compiled as `config` says (the "ir" baseline: at the
    recorded settings), through the disk cache; `cached_only`: as the cache
    holds it, or NotCompiled."""
    kernel = inst.db.kernel(inst.static_hash)
    if not kernel.has_ir:
        if cached_only:
            raise NotCompiled(kernel.demangled)
        return compile_instance_ptx(inst, kernel, config, arch, cache_dir)
    codegen = codegen_of(kernel)
    if config.baseline == "ir":
        config = codegen.baseline_config()
    launch = KernelLaunch(inst.kernel_name, inst.grid, inst.block, inst.args,
                          tuple((p["offset"], p["size"]) for p in inst.params))
    ir = kernel.description["ir"]
    return compile_kernel(kernel.bitcode(), ir["content_hash"], launch, config, arch, codegen,
                          cache_dir, application_assembler(kernel), cached_only)


def compile_instance_ptx(inst: Instance, kernel, config: ReplayConfig, arch: str,
                         cache_dir=None) -> CompiledKernel:
    """A kernel without IR compiled from the application's own PTX with the
    config's ptxas options and launch bounds, through the disk cache."""
    from mneme_cc.errors import RecordDBError
    from mneme_cc.replay.compiling import ptx_kernel

    if config.baseline == "ir":
        raise RecordDBError(f"{kernel.demangled} carries no IR (the application was not built "
                            "with mneme-cc); replay it with its original image")
    ptx_kernel.check_applies(config, kernel.demangled)
    image = kernel.ptx_image()
    if image is None:
        raise RecordDBError(f"{kernel.demangled} carries no PTX for {arch} (a cubin only): "
                            "only its launch geometry can be tuned (baseline original)")
    grounded = config.grounded()
    block = grounded.block or inst.block
    ptx = ptx_kernel.ptx_for_config(image.ptx, inst.kernel_name, config, block)
    assembler = application_assembler(kernel)

    def assemble() -> CompiledKernel:
        cubin = compile_cubin(ptx, inst.kernel_name, config, arch, assembler.path)
        return CompiledKernel(cubin.data, "", cubin.resources, {"ptxas": cubin.seconds},
                              ir_text="")

    assembled = _through_cache(_cache_root(cache_dir), cubin_key(
        ptx, inst.kernel_name, config, arch, assembler.name), assemble)
    return CompiledKernel(assembled.cubin, ptx, assembled.resources, assembled.seconds,
                          assembled.cache_hit, ir_text="", assembler=assembler.name)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _load(entry: Path) -> CompiledKernel | None:
    """A cache entry, if whole and undamaged (its files match the digests
    stored with them). A damaged one is removed and compiled again; one that
    cannot be read now (a read-only or busy cache) is compiled again and left."""
    try:
        meta_text = (entry / "meta.json").read_text()
        cubin, ptx = (entry / "kernel.cubin").read_bytes(), (entry / "kernel.ptx").read_bytes()
        has_ir = (entry / "kernel.ll").is_file()
    except FileNotFoundError:
        damaged = entry.exists()  # an entry is renamed into place whole
        if damaged:
            shutil.rmtree(entry, ignore_errors=True)
        return None
    except OSError:
        return None
    try:
        meta = json.loads(meta_text)
        if meta["digests"] != {"cubin": _digest(cubin), "ptx": _digest(ptx)} or not has_ir:
            raise ValueError("damaged")
        return CompiledKernel(cubin, ptx.decode(), Resources(**meta["resources"]), {},
                              cache_hit=True, ir_file=entry / "kernel.ll")
    except (ValueError, KeyError, TypeError):
        shutil.rmtree(entry, ignore_errors=True)
        return None


def _store(entry: Path, compiled: CompiledKernel) -> None:
    tmp = entry.with_name(f"{entry.name}.tmp.{os.getpid()}.{time.monotonic_ns()}")
    tmp.mkdir(parents=True)
    ptx = compiled.ptx.encode()
    (tmp / "kernel.cubin").write_bytes(compiled.cubin)
    (tmp / "kernel.ptx").write_bytes(ptx)
    (tmp / "kernel.ll").write_text(compiled.ir)
    (tmp / "meta.json").write_text(json.dumps({
        "resources": asdict(compiled.resources), "seconds": compiled.seconds,
        "digests": {"cubin": _digest(compiled.cubin), "ptx": _digest(ptx)}}))
    try:
        tmp.rename(entry)
    except OSError:  # another process stored the same entry first
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
