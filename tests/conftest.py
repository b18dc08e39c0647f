"""Shared fixtures: the installed tools, builds of the sample programs, GPU detection."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SAMPLES = TESTS / "samples"
MULTI = SAMPLES / "multi"

#: The kernels (mangled) and device globals each TU of the multi sample defines.
MAIN_KERNELS = {"_Z4fillPfPii", "_ZN6checks9histogramEPKiPji"}
SCALE_KERNELS = {"_Z5scaleIfEvPT_iS0_", "_Z5scaleIiEvPT_iS0_"}
STENCIL_KERNELS = {"_Z9stencil1dPKfPfi"}
SCALE_GLOBALS = {("g_bias", 4, "global"), ("c_coeffs", 16, "constant")}
STENCIL_GLOBALS = {("c_weights", 12, "constant")}


def tool_env(**extra: str) -> dict[str, str]:
    """The environment with this interpreter's scripts (mneme, mneme-cc, ...) first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def run(cmd: list[str] | str, cwd: Path | None = None, env: dict | None = None,
        check: bool = True, **kw) -> subprocess.CompletedProcess:
    """Runs a command; on unexpected failure the assertion shows its output."""
    proc = subprocess.run(cmd, cwd=cwd, env=env or tool_env(), capture_output=True,
                          text=True, shell=isinstance(cmd, str), **kw)
    if check:
        assert proc.returncode == 0, (
            f"{cmd} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def build_print_hook(tmp_path: Path) -> Path:
    """A stand-in recorder that prints what the registration hook receives."""
    hook = tmp_path / "libprint_hook.so"
    runtime = TESTS.parent / "runtime"
    run(["g++", "-std=c++17", "-shared", "-fPIC", f"-I{runtime / 'include'}",
         str(TESTS / "samples" / "hook" / "print_hook.cpp"),
         str(runtime / "src" / "EmbeddedIR.cpp"), "-o", str(hook)])
    return hook


def have_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def pytest_collection_modifyitems(config, items):
    if have_gpu():
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU visible (the gpu tier runs on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def make_build(tmp_path_factory):
    """Builds the multi sample with its Makefile (mneme-cxx, make -j); cached per opt level."""
    built: dict[str, Path] = {}

    def build(opt: str) -> Path:
        if opt not in built:
            out = tmp_path_factory.mktemp(f"make{opt}")
            run(["make", "-j4", f"BUILD={out}", f"OPT={opt}"], cwd=MULTI)
            built[opt] = out
        return built[opt]

    return build


@pytest.fixture(scope="session")
def cmake_build(tmp_path_factory) -> Path:
    """Builds the multi sample with CMake: CC/CXX/CUDA compilers all mneme's."""
    out = tmp_path_factory.mktemp("cmake")
    mneme_dir = run(["mneme", "config", "cmakedir"]).stdout.strip()
    run(["cmake", "-S", str(MULTI), "-B", str(out), "-DCMAKE_CUDA_COMPILER=mneme-cxx",
         f"-Dmneme_DIR={mneme_dir}", "-DCMAKE_BUILD_TYPE=Release"],
        env=tool_env(CC="mneme-cc", CXX="mneme-cxx"))
    run(["cmake", "--build", str(out), "-j4"])
    return out


def nvcc_wrapper(tmp_path: Path) -> Path:
    """`mneme-nvcc` as a script running this interpreter's package (the
    console script may not be installed yet), for Makefiles and CMake."""
    import stat

    script = tmp_path / "bin" / "mneme-nvcc"
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!/bin/sh\nexec '{sys.executable}' -m mneme_cc.drivers.nvcc \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def inspect_json(path: Path) -> dict:
    """What `mneme inspect --json` says of a file."""
    import json

    return json.loads(run(["mneme", "inspect", "--json", str(path)]).stdout)


#: The relocatable-device-code sample, and the ways the tests build it.
RDC = SAMPLES / "rdc"
RDC_BUILDS = ("make-O3", "make-O0", "dlink", "cxx", "cmake")


def build_rdc_sample(how: str, out: Path) -> Path:
    """tests/samples/rdc built one way into out/HOW, its program's path.

    make-O3, make-O0: its nvcc Makefile with NVCC=mneme-nvcc; dlink: the
    Makefile's `-dlink` object and host-compiler link; cxx: mneme-cxx
    -fgpu-rdc objects, an `ar` library, a link; cmake: its CMake project with
    separable compilation and mneme-nvcc; nvcc: the Makefile with nvcc.
    """
    build = out / how
    if how == "dlink":
        run(["make", "-j2", "NVCC=mneme-nvcc", f"BUILD={build}", "dlink"], cwd=RDC)
        shutil.copy(build / "rdc_dlink", build / "rdc_sample")
    elif how.startswith("make-") or how == "nvcc":
        opt = how[len("make"):] if how.startswith("make-") else "-O3"
        compiler = nvcc_path() if how == "nvcc" else "mneme-nvcc"
        run(["make", "-j2", f"NVCC={compiler}", f"OPT={opt}", f"BUILD={build}"], cwd=RDC)
    elif how == "cxx":
        build.mkdir(parents=True)
        for name in ("main", "integrate", "physics"):
            run(["mneme-cxx", "-fgpu-rdc", "-O3", "-c", str(RDC / f"{name}.cu"),
                 "-o", str(build / f"{name}.o")])
        run(["ar", "rcs", str(build / "libphysics.a"), str(build / "physics.o")])
        run(["mneme-cxx", str(build / "main.o"), str(build / "integrate.o"), f"-L{build}",
             "-lphysics", "-o", str(build / "rdc_sample")])
    elif how == "cmake":
        # CMake's own device-link step (mneme-nvcc -dlink), nothing but the compiler named.
        run(["cmake", "-S", str(RDC), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
             "-DCMAKE_CUDA_COMPILER=mneme-nvcc"])
        run(["cmake", "--build", str(build), "-j2"])
    else:
        raise ValueError(f"unknown build of the rdc sample: {how}")
    return build / "rdc_sample"


#: The layouts of tests/samples/reach: each program and the kernels it carries
#: (the C++ programs' kernels are in the libraries they link).
REACH = SAMPLES / "reach"
REACH_KERNELS = {
    "mixed": {"_Z4axpyifPKfPf", "_Z6hashediPKfPj"},
    "histo_app": {"_Z9histogramiiPj"},
    "libscan.so": {"_Z10block_scaniPKiPi"},
    "dp": {"_Z5childPiii", "_Z6parentPiii"},
    "shapes": {"_Z5areasiPf"},
}
REACH_PROGRAMS = ("mixed", "histo_app", "scan_app", "dp", "shapes")


def nvcc_path() -> str:
    """NVIDIA's nvcc: on PATH, else the toolkit's."""
    from mneme_cc.drivers import toolchain

    return shutil.which("nvcc") or str(toolchain.require_cuda_toolkit() / "bin" / "nvcc")


ANYKERNEL = SAMPLES / "anykernel"


def build_anykernel(out: Path, *targets: str) -> Path:
    """tests/samples/anykernel's programs and modules, built by NVIDIA's nvcc
    (and g++ for the driver-API program, which needs libcuda: GPU machines)."""
    out.mkdir(parents=True, exist_ok=True)
    run(["make", "-s", "-C", str(ANYKERNEL), f"OUT={out}", f"NVCC={nvcc_path()}",
         *(str(out / t) for t in targets)])
    return out


def build_reach(out: Path, compiler: str = "mneme-nvcc") -> Path:
    """tests/samples/reach's CMake project, as it is, with `compiler` as the
    CUDA compiler (mneme-nvcc, or nvcc for the reference); the build directory."""
    compiler = nvcc_path() if compiler == "nvcc" else compiler
    run(["cmake", "-S", str(REACH), "-B", str(out), "-DCMAKE_BUILD_TYPE=Release",
         f"-DCMAKE_CUDA_COMPILER={compiler}"])
    run(["cmake", "--build", str(out), "-j2"])
    return out


def check_device_link(binary: Path) -> None:
    """The link ran the device link: a fatbinary, and the calls that register it.

    Without them the program cannot launch a kernel, which a CPU test sees
    only here.
    """
    assert ".nv_fatbin" in run(["readelf", "-S", "-W", str(binary)]).stdout
    imports = run(["nm", "-D", "-u", str(binary)]).stdout
    assert {"__cudaRegisterFatBinary", "__cudaRegisterFunction"} <= \
        {line.split()[-1].split("@")[0] for line in imports.splitlines()}


EXAMPLES = TESTS.parent / "examples"
EXAMPLE_NAMES = ("vector_add", "cg", "stencil3d", "tree_search", "atomic_sum", "big_shared",
                 "multi_tu", "fp_physics", "jacobi_norm", "wave3d")

#: The floating-point flag matrix: examples built with each cell's flags
#: (after -O3) must replay with the application's numerics.
MATRIX_EXAMPLES = ("fp_physics", "cg", "wave3d")
FLAG_MATRIX = {
    "default": [],
    "contract-on": ["-ffp-contract=on"],
    "contract-off": ["-ffp-contract=off"],
    "fast-math": ["-ffast-math"],
    "ftz": ["-fgpu-flush-denormals-to-zero"],
    "O0": ["-O0"],
    "O2": ["-O2"],
}


def build_matrix_cell(example: str, cell: str, out: Path, *, compile_only: bool = False) -> Path:
    """One example built with one cell's flags by mneme-cxx (an object with -c)."""
    target = out / (f"{example}.{cell}.o" if compile_only else f"{example}.{cell}")
    run(["mneme-cxx", "-O3", *FLAG_MATRIX[cell], f"-I{EXAMPLES / 'common'}",
         *(["-c"] if compile_only else []), str(EXAMPLES / example / f"{example}.cu"),
         "-o", str(target)])
    return target


@pytest.fixture(scope="session")
def example_binaries(tmp_path_factory) -> Path:
    """The example applications (and the record test samples), built with mneme-cxx.

    On a GPU machine without clang, MNEME_EXAMPLES names a directory holding
    binaries built elsewhere (scripts/build-gpu-carry makes one).
    """
    prebuilt = os.environ.get("MNEME_EXAMPLES")
    if prebuilt:
        return Path(prebuilt)
    if not shutil.which("clang-22") and not os.environ.get("MNEME_CLANG"):
        # Only GPU tests use this: on a GPU machine, missing binaries are an
        # error to fix, not a reason to pass quietly.
        pytest.fail("the GPU tier needs the examples: clang-22 here, or MNEME_EXAMPLES "
                    "pointing at binaries from scripts/build-gpu-carry")
    build = tmp_path_factory.mktemp("examples")
    mneme_dir = run(["mneme", "config", "cmakedir"]).stdout.strip()
    run(["cmake", "-S", str(EXAMPLES), "-B", str(build / "tree"), "-DCMAKE_CUDA_COMPILER=mneme-cxx",
         f"-Dmneme_DIR={mneme_dir}", "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", str(build / "tree"), "-j4"])
    for name in (*EXAMPLE_NAMES, "fault_injection", "reassociation"):
        shutil.copy(build / "tree" / name / name, build / name)
    (build / "matrix").mkdir()
    for example in MATRIX_EXAMPLES:
        for cell in FLAG_MATRIX:
            build_matrix_cell(example, cell, build / "matrix")
    for sample in ("managed", "launch_apis", "contraction"):
        run(["mneme-cxx", "-O2", str(SAMPLES / "record" / f"{sample}.cu"), "-o", str(build / sample)])
    return build


def _postgres_bin() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL server on loopback for this session, its URL.

    Started from Debian's postgresql package, which scripts/setup.sh installs
    (as it installs psycopg2 with the test extras): missing, the test fails.
    As the postgres user when the tests run as root, since the server refuses root.
    """
    import importlib.util
    import socket
    import tempfile

    bindir = _postgres_bin()
    if bindir is None:
        pytest.fail("PostgreSQL is not installed: scripts/setup.sh installs it "
                    "(apt-get install postgresql)")
    if importlib.util.find_spec("psycopg2") is None:
        pytest.fail("psycopg2 is missing: pip install '.[test]' (psycopg2-binary)")
    home = Path(tempfile.mkdtemp(prefix="mneme-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        import pwd

        user = pwd.getpwnam("postgres")
        os.chmod(home, 0o755)
        os.chown(home, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = home / "data"
    run([*as_user, str(bindir / "initdb"), "-D", str(data), "-U", "mneme", "--auth=trust",
         "-E", "UTF8"])
    run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(home / "log"), "-w",
         "-o", f"-p {port} -k {home} -c listen_addresses=127.0.0.1", "start"])
    try:
        yield f"postgresql+psycopg2://mneme@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                        "stop"], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def instance(tmp_path):
    """The synthetic database's one instance (tests/synthetic_db.py): an add of
    1024 floats, written without a GPU."""
    import numpy as np
    from synthetic_db import make_database

    from mneme_cc.record.db import RecordDB

    a = np.arange(1024, dtype=np.float32)
    make_database(tmp_path / "db", a, a, a + a)
    (inst,) = RecordDB(tmp_path / "db").instances
    return inst


#: The example applications' arguments for the GPU tier: small, fast runs.
ARGS = {
    "vector_add": ["1000000"],
    "cg": ["12", "30"],
    "stencil3d": ["16"],
    "tree_search": ["1000", "4096"],
    "atomic_sum": ["100000"],
    "big_shared": ["8"],
    "multi_tu": ["10000"],
    "fp_physics": ["65536", "2"],
    "jacobi_norm": ["2048", "2"],
    "wave3d": ["48", "4"],
}
