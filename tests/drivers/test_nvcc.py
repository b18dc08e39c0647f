"""mneme-nvcc: nvcc's flags as clang's, the ones it refuses, and builds written for nvcc."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import SAMPLES, inspect_json, nvcc_wrapper, run, tool_env

from mneme_cc.drivers import nvcc, nvcc_options, nvcc_translate, toolchain

SAMPLE = SAMPLES / "nvcc"
SAMPLE_KERNELS = {"_Z5saxpyfPKfPfi", "_Z9normalizePffi"}
DEV = "-Xarch_device"
PREC_SQRT = [DEV, "-mllvm=-nvvm-reflect-add=__CUDA_PREC_SQRT=1"]


def has(args: list[str], piece: list[str]) -> bool:
    """`piece` appears in `args` as a contiguous run."""
    return any(args[i:i + len(piece)] == piece for i in range(len(args) - len(piece) + 1))


# nvcc argv -> pieces the clang argv must contain, and pieces it must not.
TRANSLATIONS = [
    (["-arch=sm_90", "-c", "a.cu"], [["--cuda-gpu-arch=sm_90"], ["-c"], ["a.cu"]], []),
    (["-arch", "sm_80", "-c", "a.cu"], [["--cuda-gpu-arch=sm_80"]], [["--cuda-gpu-arch=sm_90"]]),
    (["--gpu-architecture=compute_90", "-c", "a.cu"], [["--cuda-gpu-arch=sm_90"]], []),
    (["-arch=sm_90a", "-c", "a.cu"], [["--cuda-gpu-arch=sm_90a"]], []),
    (["-arch=native", "-c", "a.cu"], [], [["--cuda-gpu-arch=native"]]),
    (["-arch=sm_80", "-arch=sm_90", "-c", "a.cu"], [["--cuda-gpu-arch=sm_90"]],
     [["--cuda-gpu-arch=sm_80"]]),  # nvcc: the last -arch wins
    (["-gencode", "arch=compute_90,code=sm_90", "-c", "a.cu"], [["--cuda-gpu-arch=sm_90"]], []),
    (["-gencode=arch=compute_80,code=[sm_80,sm_90]", "-c", "a.cu"],
     [["--cuda-gpu-arch=sm_80"], ["--cuda-gpu-arch=sm_90"]], []),
    (["--generate-code", 'arch=compute_90,code="sm_90,compute_90"', "-c", "a.cu"],
     [["--cuda-gpu-arch=sm_90"]], []),
    (["-gencode", "arch=compute_90,code=compute_90", "-c", "a.cu"], [["--cuda-gpu-arch=sm_90"]], []),
    (["-arch=compute_80", "-code=sm_80,sm_90", "-c", "a.cu"],
     [["--cuda-gpu-arch=sm_80"], ["--cuda-gpu-arch=sm_90"]], []),
    (["-c", "a.cu", "-o", "b.o"], [["-o", "b.o"], ["-c"]], []),
    (["-dc", "a.cu"], [["-fgpu-rdc"], ["-c"]], []),
    (["-rdc=true", "-c", "a.cu"], [["-fgpu-rdc"]], []),
    (["--relocatable-device-code", "true", "-c", "a.cu"], [["-fgpu-rdc"]], []),
    (["-rdc=false", "-c", "a.cu"], [], [["-fgpu-rdc"]]),
    (["-x", "cu", "-c", "a.cpp"], [["-x", "cuda", "a.cpp"]], []),
    (["-c", "a.cpp", "-x", "cu"], [["-x", "cuda", "a.cpp"]], []),  # nvcc's -x is for every file
    (["-x", "cuda", "-c", "a.cpp"], [["-x", "cuda", "a.cpp"]], []),  # CMake's spelling
    (["-c", "m.c"], [["-x", "c", "m.c"]], []),  # nvcc compiles .c as C
    (["-c", "a.cpp"], [["-c"], ["a.cpp"]], [["-x", "cuda"], [DEV, "-O3"]]),
    (["-Xcompiler", "-fPIC,-Wall", "-c", "a.cu"],
     [["-Xarch_host", "-fPIC"], ["-Xarch_host", "-Wall"]], []),
    (["--compiler-options=-fopenmp", "-Xcompiler=-march=native", "-c", "a.cu"],
     [["-Xarch_host", "-fopenmp"], ["-Xarch_host", "-march=native"]], []),
    (["-Xcompiler", "-isystem,/opt/inc", "-c", "a.cu"], [["-isystem", "/opt/inc"]], []),
    (["-Xcompiler", "-fPIC", "a.o", "-o", "app"], [["-fPIC"]], [["-Xarch_host"]]),
    (["-Xptxas", "-v,-O2", "-c", "a.cu"], [["-Xcuda-ptxas", "-v"], ["-Xcuda-ptxas", "-O2"]], []),
    (["--ptxas-options=-dlcm=ca", "-c", "a.cu"], [["-Xcuda-ptxas", "-dlcm=ca"]], []),
    (["-Xlinker", "-rpath,/opt/lib", "a.o"], [["-Xlinker", "-rpath", "-Xlinker", "/opt/lib"]], []),
    (["-ccbin", "g++-12", "-c", "a.cu"], [], [["g++-12"]]),
    (["--compiler-bindir=/usr/bin/gcc", "-c", "a.cu"], [], [["/usr/bin/gcc"]]),
    (["--use_fast_math", "-c", "a.cu"],
     [["-fgpu-flush-denormals-to-zero"], [DEV, "-freciprocal-math", DEV, "-fapprox-func"],
      ["-fgpu-approx-transcendentals"]], [PREC_SQRT, ["-ffast-math"], [DEV, "-ffp-contract=off"]]),
    (["-use_fast_math", "-ftz=false", "-c", "a.cu"], [["-fgpu-approx-transcendentals"]],
     [["-fgpu-flush-denormals-to-zero"]]),
    (["-ftz=true", "-use_fast_math", "-prec-sqrt=true", "-c", "a.cu"],
     [["-fgpu-flush-denormals-to-zero"], PREC_SQRT], []),
    (["--ftz", "true", "-c", "a.cu"], [["-fgpu-flush-denormals-to-zero"], PREC_SQRT], []),
    (["--prec-div=false", "-c", "a.cu"], [[DEV, "-fapprox-func"]], [["-fgpu-approx-transcendentals"]]),
    (["--prec-sqrt=false", "-c", "a.cu"], [], [PREC_SQRT]),
    (["--fmad=false", "-c", "a.cu"], [[DEV, "-ffp-contract=off"]], []),
    (["-c", "a.cu"], [PREC_SQRT, [DEV, "-O3"]],  # nvcc's defaults: sqrt.rn, optimised device code
     [["-fgpu-flush-denormals-to-zero"], [DEV, "-fapprox-func"]]),
    (["--expt-relaxed-constexpr", "--extended-lambda", "--expt-extended-lambda", "-c", "a.cu"],
     [["a.cu"]], [["--expt-relaxed-constexpr"]]),
    (["-lineinfo", "-O3", "-c", "a.cu"], [[DEV, "-O3", DEV, "-gline-tables-only"]], []),
    (["-G", "-c", "a.cu"], [[DEV, "-O0", DEV, "-g", "--cuda-noopt-device-debug"]], [[DEV, "-O3"]]),
    (["-G", "-dopt", "on", "-c", "a.cu"], [[DEV, "-O3", DEV, "-gline-tables-only"]],
     [["--cuda-noopt-device-debug"]]),
    (["-g", "-c", "a.cu"], [["-Xarch_host", "-g"]], []),
    (["-g", "a.o", "-o", "app"], [["-g"]], [["-Xarch_host"]]),
    (["-O0", "-c", "a.cu"], [["-O0"], [DEV, "-O3"]], []),
    (["--optimize", "2", "-c", "a.cu"], [["-O2"]], []),
    (["-std=c++17", "-c", "a.cu"], [["-std=c++17"]], []),
    (["--std", "c++20", "-c", "a.cu"], [["-std=c++20"]], []),
    (["-std", "c++14", "-c", "a.cu"], [["-std=c++14"]], []),
    (["-Iinc", "-I", "a,b", "--include-path=c", "-c", "a.cu"],
     [["-I", "inc"], ["-I", "a"], ["-I", "b"], ["-I", "c"]], []),
    (["-DX=1,Y", "-D", "Z", "--define-macro=W=2", "-UQ", "--undefine-macro", "R", "-c", "a.cu"],
     [["-D", "X=1"], ["-D", "Y"], ["-D", "Z"], ["-D", "W=2"], ["-U", "Q"], ["-U", "R"]], []),
    (["a.o", "-Llib", "--library-path", "lib2", "-lfoo", "-l", "bar", "--library=baz", "-o", "app"],
     [["-L", "lib"], ["-L", "lib2"], ["-lfoo", "-lbar", "-lbaz"]], []),
    (["-M", "a.cu"], [["-M"]], [["-lcudart"]]),
    (["-MM", "a.cu"], [["-MM"]], []),
    (["-MD", "-MF", "a.d", "-MT", "a.o", "-c", "a.cu"], [["-MD"], ["-MF", "a.d"], ["-MT", "a.o"]], []),
    (["-E", "a.cu"], [["-E"]], []),
    (["--keep", "--keep-dir", "tmp", "-c", "a.cu"], [], [["tmp"]]),
    (["-w", "-c", "a.cu"], [["-w"]], []),
    (["-maxrregcount", "32", "-c", "a.cu"], [["-Xcuda-ptxas", "--maxrregcount=32"]], []),
    (["--maxrregcount=64", "-c", "a.cu"], [["-Xcuda-ptxas", "--maxrregcount=64"]], []),
    (["-shared", "a.o", "-o", "liba.so"], [["-shared"], ["-lcudart"]], []),
    (["-Xcudafe", "--diag_suppress=177", "-c", "a.cu"], [], [["--diag_suppress=177"]]),
    (["--default-stream", "per-thread", "-c", "a.cu"], [["-fgpu-default-stream=per-thread"]], []),
    (["-res-usage", "-c", "a.cu"], [["-Xcuda-ptxas", "-v"]], []),
    (["-noeh", "-c", "a.cu"], [["-fno-exceptions"]], []),
    (["-Werror", "all-warnings", "-c", "a.cu"], [["-Werror"]], [["all-warnings"]]),
    (["-Werror=reorder,cross-execution-space-call", "-c", "a.cu"], [["-Werror=reorder"]], []),
    (["-Werror", "-c", "a.cu"], [["-Werror", "-c"]], []),  # CMake's clang -Werror
    (["-ptx", "a.cu"], [["--cuda-device-only", "-S"], ["-o", "a.ptx"]], [["-lcudart"]]),
    (["-cubin", "a.cu", "-o", "k.cubin"], [["--cuda-device-only", "-c"], ["-o", "k.cubin"]], []),
    (["-lib", "a.o", "-o", "liba.a"], [["--emit-static-lib"]], [["-lcudart"]]),
    (["a.o", "b.o", "-o", "app"], [["-lcudart"], ["-lpthread"]], [["-fgpu-rdc"]]),
    (["-cudart", "none", "a.o", "-o", "app"], [], [["-lcudart"]]),
    (["-cudart=static", "a.o", "-o", "app"], [["-lcudart"]], [["-lcudart_static"]]),
    (["-dryrun", "-c", "a.cu"], [["-###"]], []),
    (["-v", "-c", "a.cu"], [], [["-v"]]),  # nvcc's `#$` lines, not clang's
    (["-Xcompiler", "-m64,-fPIC", "-c", "a.cu"], [["-Xarch_host", "-fPIC"]], [["-m64"]]),
    (["-c", "a.cu"], [["-D__NVCC__"], ["-include"]], [["-D__CUDACC_RDC__"]]),
    (["-dc", "a.cu"], [["-D__NVCC__"], ["-D__CUDACC_RDC__"]], []),
    (["-c", "a.cpp"], [["-D__NVCC__"]], [["-include"], ["-D__CUDACC_RDC__"]]),
    (["--cuda-feature=+ptx90", "-c", "a.cu"], [["--cuda-feature=+ptx90"]], []),
    # The clang spellings CMake sends once --version said "clang version".
    (["--cuda-gpu-arch=sm_75", "--cuda-path=/usr/local/cuda", "-fPIC", "-x", "cuda", "-c", "a.cu"],
     [["--cuda-gpu-arch=sm_75"], ["--cuda-path=/usr/local/cuda"], ["-fPIC"]], []),
    (["a.o", "-o", "app", "-Wl,-rpath,/x", "-lcudart_static"], [["-Wl,-rpath,/x", "-lcudart_static"]],
     []),
    (["--forward-unknown-to-host-compiler", "-Wextra", "-c", "a.cu"], [["-Xarch_host", "-Wextra"]],
     []),
    (["--forward-unknown-opts", "-fopenmp", "a.o", "-o", "app"], [["-fopenmp"]], []),
    (["--forward-unknown-to-host-linker", "--as-needed", "a.o"], [["-Xlinker", "--as-needed"]], []),
]


def test_every_option_has_an_action():
    known = {"pass", "sep", "list", "joined", "host", "set", "error", "ignore", "werror",
             *nvcc_translate._HANDLERS}
    for option in (*nvcc_options._LONG.values(), *nvcc_options._SHORT.values()):
        kind, _, what = option.action.partition(":")
        assert kind in known, option
        if kind == "set":
            assert hasattr(nvcc_options.Translation(), what.partition("=")[0]), option
        if kind == "error":
            assert option.name in nvcc_options._ADVICE, option


@pytest.mark.parametrize("argv, present, absent", TRANSLATIONS)
def test_translation(argv, present, absent):
    args = nvcc.translate(argv).args
    for piece in present:
        assert has(args, piece), (piece, args)
    for piece in absent:
        assert not has(args, piece), (piece, args)


def test_device_settings_come_after_the_users():
    args = nvcc.translate(["-O0", "-c", "a.cu", "-Xcompiler", "-O1"]).args
    assert args.index("-O0") < len(args) - 1 - args[::-1].index("-O3")
    assert has(args, ["-Xarch_host", "-O1"])
    assert args[-2:] == PREC_SQRT


def test_libraries_follow_the_inputs_in_one_group():
    args = nvcc.translate(["-lfoo", "a.o", "-Xlinker", "--as-needed", "b.cu", "-o", "app"]).args
    start, end = args.index("-Wl,--start-group"), args.index("-Wl,--end-group")
    assert start < args.index("a.o") < args.index("b.cu") < args.index("-lfoo") < end
    assert args.index("b.cu") < args.index("--as-needed") < end
    assert start < args.index("-lcudart") < end
    assert "-Wl,--start-group" not in nvcc.translate(["-c", "a.cu", "-lfoo"]).args


def test_every_compile_is_as_lenient_as_nvcc():
    for source in ("a.cu", "a.cpp"):
        args = nvcc.translate(["-c", source]).args
        assert has(args, nvcc.LENIENCY)
    assert not has(nvcc.translate(["a.o", "-o", "app"]).args, nvcc.LENIENCY)


def test_toolkit_headers_nvcc_adds():
    toolkit = toolchain.find_cuda_toolkit()
    assert has(nvcc.translate(["-c", "a.cpp"]).args, [f"-I{toolkit / 'include'}"])
    if (toolkit / "include" / "cccl").is_dir():
        assert has(nvcc.translate(["-c", "a.cu"]).args, ["-isystem", str(toolkit / "include" / "cccl")])


def test_rdc_compiles_draw_no_warning():
    # Their objects carry IR like any other (tests/drivers/test_rdc.py).
    assert not nvcc.translate(["-dc", "a.cu"]).warnings
    assert not nvcc.translate(["a.o", "b.o", "-o", "app"]).warnings


def test_options_files(tmp_path):
    inner = tmp_path / "inner.rsp"
    inner.write_text("-arch=sm_80 -DINNER")
    outer = tmp_path / "outer.rsp"
    outer.write_text(f"-c @{inner}")
    flags = tmp_path / "flags.txt"
    flags.write_text('-DQUOTED="a b"')
    args = nvcc.translate([f"@{outer}", "--options-file", str(flags), "a.cu"]).args
    assert has(args, ["--cuda-gpu-arch=sm_80"]) and has(args, ["-D", "INNER"])
    assert has(args, ["-D", "QUOTED=a b"]) and has(args, ["-c"])
    assert has(nvcc.translate([f"-optf={flags}", "-c", "a.cu"]).args, ["-D", "QUOTED=a b"])


def test_the_full_command_goes_through_mneme_cxx():
    command = nvcc.nvcc_command(["-arch=sm_90", "-O3", "-c", "a.cu", "-o", "a.o"]).argv
    assert command[1] == "--driver-mode=g++"
    assert any(a.startswith("-fpass-plugin=") for a in command)
    assert sum(a.startswith("--cuda-gpu-arch=") for a in command) == 1


def nvcc_tool(args: list[str], tmp_path: Path, **kw):
    """The real module in a subprocess (from tmp_path, so the installed package is imported)."""
    return run([sys.executable, "-m", "mneme_cc.drivers.nvcc", *args], cwd=tmp_path, check=False, **kw)


def one_line_error(proc, *fragments: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("mneme-nvcc: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in proc.stderr


# Every nvcc option clang cannot do: its one-line error and exit status 2.
UNSUPPORTED = [
    ["-dw", "a.cu"],
    ["-cuda", "a.cu"], ["-fatbin", "a.cu"], ["-optix-ir", "a.cu"], ["-ltoir", "a.cu"],
    ["-run", "a.cu"], ["-run-args", "1", "a.cu"], ["-odir", "obj", "-c", "a.cu"],
    ["-ldir", "/x", "-c", "a.cu"], ["-target-dir", "aarch64-linux", "-c", "a.cu"],
    ["-dlto", "-c", "a.cu"], ["-lto", "-c", "a.cu"], ["-gen-opt-lto", "a.o"],
    ["-Xarchive", "x", "-lib", "a.o"], ["-Xnvlink", "--suppress-stack-size-warning", "a.o"],
    ["-fdevice-time-trace", "t.json", "-c", "a.cu"], ["-clean", "a.cu"], ["-e", "k", "a.cu"],
    ["-ewp", "a.cu"], ["-qpp-config", "x", "a.cu"], ["-astoolspatch", "a.cu"], ["-code-ls"],
    ["-arch-ls"], ["-hls", "gen-lcs", "a.o"], ["-aug-hls", "a.o"], ["-reloc-ptx", "a.cu"],
    ["-sanitize", "memcheck", "a.cu"],
    ["-arch=lto_90", "a.cu"], ["-gencode", "arch=compute_90,code=lto_90", "a.cu"], ["-m", "32", "a.cu"],
    ["-Xcompiler", "-m32", "a.cu"],
]


@pytest.mark.parametrize("argv", UNSUPPORTED, ids=lambda a: a[0])
def test_unsupported_option_is_a_one_line_error(argv, tmp_path):
    proc = nvcc_tool(argv, tmp_path)
    flag = re.split("[= ]", argv[0])[0]
    one_line_error(proc, f"mneme-nvcc: {flag}", "has no clang equivalent; ")


@pytest.mark.parametrize("argv", [
    ["-foo", "-c", "a.cu"], ["-Wall", "-c", "a.cu"], ["-fopenmp", "a.cu"], ["--gpu-arch=sm_90", "a.cu"],
    ["-isystem/x", "a.cu"], ["--dc", "a.cu"], ["-xcu", "a.cu"],
], ids=lambda a: a[0])
def test_options_nvcc_lacks_too_are_errors(argv, tmp_path):
    flag = argv[0].partition("=")[0]
    one_line_error(nvcc_tool(argv, tmp_path), f"mneme-nvcc: {flag} is not an nvcc option; ",
                   "-Xcompiler")


@pytest.mark.parametrize("argv, message", [
    (["-o"], "-o needs a value"),
    (["-ftz=1", "a.cu"], "expected true or false"),
    (["-rdc", "yes", "a.cu"], "expected true or false"),
    (["-arch=sm_9x", "a.cu"], "is not a GPU architecture"),
    (["-gencode", "arch=compute_90", "a.cu"], "expected arch=compute_NN,code=sm_NN"),
    (["-lineinfo=true", "a.cu"], "takes no value"),
    (["-x", "fortran", "a.cu"], "expected c, c++ or cu"),
    (["-std=c++99", "a.cu"], "expected a C++ standard"),
    (["-cudart", "maybe", "a.o"], "expected none, shared or static"),
    (["-Werror=bogus", "a.cu"], "not a kind nvcc knows"),
    (["-maxrregcount", "lots", "a.cu"], "expected a number of registers"),
    (["-O", "fast", "a.cu"], "expected an optimisation level"),
    (["k.ptx", "-o", "app"], "device-code inputs"),
    (["@missing.rsp"], "cannot read options file missing.rsp"),
])
def test_bad_values_are_one_line_errors(argv, message, tmp_path):
    one_line_error(nvcc_tool(argv, tmp_path), message)


def test_options_file_that_includes_itself(tmp_path):
    loop = tmp_path / "loop.rsp"
    loop.write_text(f"-c @{loop}")
    one_line_error(nvcc_tool([f"@{loop}"], tmp_path), "includes itself")


def test_version_makes_cmake_drive_it_as_nvcc(tmp_path):
    proc = nvcc_tool(["--version"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"nvcc: [^\n]+ Cuda compiler driver", proc.stdout)  # CMake's nvcc test
    version = nvcc.nvcc_identity.toolkit_version(toolchain.require_cuda_toolkit())
    assert f"release {version[0]}.{version[1]}, V{'.'.join(map(str, version))}" in proc.stdout
    assert "clang version" in proc.stdout
    assert nvcc_tool(["-V"], tmp_path).stdout == proc.stdout


def test_verbose_prints_nvcc_s_lines_for_cmake(tmp_path):
    """`-v`: the toolkit's directories as nvcc's `#$` lines, then the command,
    whose LIBRARIES and first word (mneme-cxx) CMake reads."""
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k() {}\nint main() { k<<<1, 1>>>(); }\n")
    proc = nvcc_tool(["-v", str(source), "-o", str(tmp_path / "app")], tmp_path)
    assert proc.returncode == 0, proc.stderr
    toolkit = toolchain.require_cuda_toolkit()
    assert f"#$ TOP={toolkit}\n" in proc.stderr
    assert "#$ GPU_ARCHS=-arch compute_90" in proc.stderr
    libraries = re.search(r"#\$ LIBRARIES= *([^\n]*)\n", proc.stderr).group(1)
    (link,) = [line for line in proc.stderr.splitlines()[1:] if libraries in line
               and not line.startswith("#$ LIBRARIES")]
    assert link.startswith('#$ "') and link.split('"')[1].endswith("mneme-cxx")
    assert '"-lcudart"' in link
    assert (tmp_path / "app").is_file()
    # What CMake runs first to find the toolkit: the lines come before the error.
    proc = nvcc_tool(["-v", "__cmake_determine_cuda"], tmp_path)
    assert proc.returncode != 0 and f"#$ TOP={toolkit}" in proc.stderr


def test_help(tmp_path):
    proc = nvcc_tool(["--help"], tmp_path)
    assert proc.returncode == 0 and "docs/from-nvcc.md" in proc.stdout


def test_toolchain_errors_keep_their_one_line(tmp_path):
    proc = nvcc_tool(["-c", str(SAMPLE / "saxpy.cu"), "-o", str(tmp_path / "s.o")], tmp_path,
                     env=tool_env(CUDA_HOME=str(tmp_path)))
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"mneme-nvcc: error: CUDA_HOME={tmp_path} is not a CUDA toolkit " \
                                  "(no include/cuda_runtime.h there)"


@pytest.mark.parametrize("opt", ["-O3", "-O0"])
def test_makefile_written_for_nvcc(opt, tmp_path):
    out = tmp_path / "build"
    run(["make", "-j4", f"NVCC={nvcc_wrapper(tmp_path)}", f"OPT={opt}", f"BUILD={out}"], cwd=SAMPLE)
    modules = inspect_json(out / "nvcc_sample")["modules"]
    assert {k["name"] for m in modules for k in m["kernels"]} == SAMPLE_KERNELS
    assert {m["source"] for m in modules} == {"saxpy.cu", "main.cu"}
    for module in modules:
        assert module["ir_bytes"] > 0 and module["arch"] == "sm_90"
        # nvcc's -O is the host's: device code is optimised at -O0 too, sqrt correctly rounded.
        assert module["codegen"]["opt_level"] == "3"
        assert module["codegen"]["prec_sqrt"] and module["codegen"]["prec_div"]


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc is not installed")
def test_the_sample_is_valid_nvcc_input(tmp_path):
    out = tmp_path / "build"
    run(["make", "-j4", "NVCC=nvcc", f"BUILD={out}"], cwd=SAMPLE)
    assert (out / "nvcc_sample").is_file()


def test_cmake_cuda_compiler(tmp_path):
    """CMake identifies mneme-nvcc as nvcc (with the toolkit's version), drives it
    with nvcc's flags, the project's own included, and links through mneme-cxx."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(f"""
cmake_minimum_required(VERSION 3.24)
project(nvcc_cmake LANGUAGES CXX CUDA)
add_executable(app {SAMPLE / 'saxpy.cu'} {SAMPLE / 'main.cu'})
set_target_properties(app PROPERTIES CUDA_ARCHITECTURES 90 POSITION_INDEPENDENT_CODE ON)
target_compile_options(app PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--use_fast_math -lineinfo
                       --expt-relaxed-constexpr -Xcompiler=-Wall>)
""")
    build = tmp_path / "build"
    run(["cmake", "-S", str(source), "-B", str(build), f"-DCMAKE_CUDA_COMPILER={nvcc_wrapper(tmp_path)}",
         "-DCMAKE_BUILD_TYPE=Release"])
    (identified,) = build.joinpath("CMakeFiles").glob("*/CMakeCUDACompiler.cmake")
    text = identified.read_text()
    assert 'set(CMAKE_CUDA_COMPILER_ID "NVIDIA")' in text
    assert 'set(CMAKE_CUDA_HOST_COMPILER_ID "Clang")' in text
    assert re.search(r'set\(CMAKE_CUDA_HOST_LINK_LAUNCHER ".*/mneme-cxx"\)', text)
    assert 'set(CMAKE_CUDA_RUNTIME_LIBRARY_DEFAULT "SHARED")' in text
    run(["cmake", "--build", str(build), "-j4"])
    modules = inspect_json(build / "app")["modules"]
    assert {k["name"] for m in modules for k in m["kernels"]} == SAMPLE_KERNELS
    for module in modules:  # --use_fast_math reached the device code
        assert module["codegen"]["ftz"] and not module["codegen"]["prec_div"]
        assert not module["codegen"]["prec_sqrt"] and not module["codegen"]["no_nans"]



def test_arch_all_is_every_arch_the_toolkit_and_clang_share():
    if not (toolchain.require_cuda_toolkit() / "bin" / "nvcc").is_file():
        pytest.skip("the toolkit has no nvcc to list its archs")
    every = nvcc.translate(["-arch=all", "-c", "a.cu"]).args
    major = nvcc.translate(["-arch=all-major", "-c", "a.cu"]).args
    archs = {a.partition("=")[2] for a in every if a.startswith("--cuda-gpu-arch=")}
    majors = {a.partition("=")[2] for a in major if a.startswith("--cuda-gpu-arch=")}
    assert {"sm_75", "sm_90", "sm_120"} <= archs and "sm_86" in archs
    assert majors < archs and "sm_90" in majors and "sm_86" not in majors
