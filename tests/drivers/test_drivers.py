"""mneme-cc / mneme-cxx: what they add, what they leave alone, how they fail."""

from __future__ import annotations

import filecmp
import stat
import sys

import pytest
from conftest import SAMPLES, run, tool_env

from mneme_cc.drivers import driver, invocation, toolchain

HELLO = SAMPLES / "plain" / "hello.c"
VARIANT = SAMPLES / "variant.cu"


@pytest.mark.parametrize("args, inputs, cuda, links", [
    (["-c", "a.cu", "-o", "a.o"], ["a.cu"], ["a.cu"], False),
    (["-x", "cuda", "-c", "a.cpp"], ["a.cpp"], ["a.cpp"], False),
    (["-xcuda", "a.cpp", "-x", "none", "b.cu", "c.cpp"], ["a.cpp", "b.cu", "c.cpp"],
     ["a.cpp", "b.cu"], True),
    (["-x", "c++", "-c", "a.cu"], ["a.cu"], [], False),  # the build asked for C++
    (["-I", "inc.cu", "-D", "X", "-o", "out.cu", "-c", "m.c"], ["m.c"], [], False),
    (["a.o", "b.o", "-o", "app", "-L", "lib", "-l", "m"], ["a.o", "b.o"], [], True),
    (["--version"], [], [], False),
    (["-E", "a.cu"], ["a.cu"], ["a.cu"], False),
    (["--language=cuda", "-c", "a.cpp"], ["a.cpp"], ["a.cpp"], False),
    (["--language", "cuda", "-c", "a.cpp"], ["a.cpp"], ["a.cpp"], False),
])
def test_analyse_finds_inputs_cuda_and_linking(args, inputs, cuda, links):
    inv = invocation.analyse(args)
    assert (inv.inputs, inv.cuda_inputs, inv.links) == (inputs, cuda, links)


def test_cuda_compile_gets_its_flags_before_the_users():
    command = driver.clang_command("c++", ["-O2", "-c", "a.cu", "-o", "a.o"])
    assert command[1] == "--driver-mode=g++"
    plugin = next(a for a in command if a.startswith("-fpass-plugin="))
    assert plugin.endswith("libMnemePasses.so")
    assert f"--cuda-gpu-arch={toolchain.DEFAULT_CUDA_ARCH}" in command
    assert command.index(plugin) < command.index("-O2")
    assert command[-5:] == ["-O2", "-c", "a.cu", "-o", "a.o"]


def test_user_choices_are_not_overridden():
    command = driver.clang_command(
        "c++", ["--cuda-gpu-arch=sm_80", "--cuda-path=/usr/local/cuda", "-c", "a.cu"])
    assert not any(a.startswith("--cuda-gpu-arch=sm_90") for a in command)
    assert sum(a.startswith("--cuda-path=") for a in command) == 1


def test_preprocessing_needs_no_plugin():
    command = driver.clang_command("c++", ["-E", "a.cu"])
    assert not any(a.startswith("-fpass-plugin") for a in command)
    assert any(a.startswith("--cuda-path=") for a in command)


def test_non_cuda_commands_pass_through_untouched():
    for args in (["-O2", "-c", "m.c", "-o", "m.o"], ["m.o", "-o", "app", "-lm"], ["--version"]):
        assert driver.clang_command("c", args)[1:] == args


def test_cuda_links_swap_in_the_shared_runtime():
    command = driver.clang_command("c++", ["a.cu", "-o", "app", "-lcudart_static", "-ldl"])
    assert "-lcudart_static" not in command
    assert command[-1] == "-lcudart"
    assert any(a.startswith("-Wl,-rpath,") for a in command)


def test_separate_link_of_cuda_objects_links_the_runtime(tmp_path):
    obj = tmp_path / "v.o"
    run(["mneme-cxx", "-DVARIANT=1", "-c", str(VARIANT), "-o", str(obj)])
    assert driver.clang_command("c++", [str(obj), "-o", "app"])[-1] == "-lcudart"


def test_non_cuda_source_builds_exactly_as_with_clang(tmp_path):
    clang = toolchain.select_clang()
    run(["mneme-cc", "-O2", "-c", str(HELLO), "-o", str(tmp_path / "mneme.o")])
    run([clang, "-O2", "-c", str(HELLO), "-o", str(tmp_path / "clang.o")])
    assert filecmp.cmp(tmp_path / "mneme.o", tmp_path / "clang.o", shallow=False)
    run(["mneme-cc", str(tmp_path / "mneme.o"), "-o", str(tmp_path / "mneme")])
    run([clang, str(tmp_path / "clang.o"), "-o", str(tmp_path / "clang")])
    assert filecmp.cmp(tmp_path / "mneme", tmp_path / "clang", shallow=False)
    out = run([str(tmp_path / "mneme")]).stdout
    assert out == run([str(tmp_path / "clang")]).stdout
    assert "350 steps from 77031" in out


def test_clang_exit_status_and_diagnostics_come_through(tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k() { undeclared(); }\n")
    proc = run(["mneme-cxx", "-c", str(bad), "-o", str(tmp_path / "bad.o")], check=False)
    assert proc.returncode == 1
    assert "use of undeclared identifier 'undeclared'" in proc.stderr


def one_line_error(proc, *fragments: str) -> None:
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in proc.stderr


def test_unknown_arch_in_mneme_cuda_arch(tmp_path):
    proc = run(["mneme-cxx", "-c", str(VARIANT), "-DVARIANT=1", "-o", str(tmp_path / "v.o")],
               env=tool_env(MNEME_CUDA_ARCH="sm_9x"), check=False)
    one_line_error(proc, "mneme-cxx: error:", "MNEME_CUDA_ARCH", "sm_9x")


def test_an_empty_mneme_cuda_arch(tmp_path):
    proc = run(["mneme-cxx", "-c", str(VARIANT), "-DVARIANT=1", "-o", str(tmp_path / "v.o")],
               env=tool_env(MNEME_CUDA_ARCH=","), check=False)
    one_line_error(proc, "mneme-cxx: error:", "MNEME_CUDA_ARCH=','", "names no GPU arch")


def test_response_files_nested_and_broken(tmp_path):
    inner = tmp_path / "inner.rsp"
    inner.write_text(f"-c {VARIANT}")
    outer = tmp_path / "outer.rsp"
    outer.write_text(f"-DVARIANT=1 @{inner}")
    assert invocation.analyse([f"@{outer}", "-o", "v.o"]).cuda_inputs == [str(VARIANT)]
    looping = tmp_path / "loop.rsp"
    looping.write_text(f"-c @{looping} @{looping} @{looping}")
    assert invocation.analyse([f"@{looping}"]).inputs == [f"@{looping}"] * 3  # clang says why
    broken = tmp_path / "broken.rsp"
    broken.write_text('-c "a.cu')
    proc = run(["mneme-cxx", f"@{broken}"], check=False)
    one_line_error(proc, "mneme-cxx: error:", "response file", "No closing quotation")


def test_unknown_arch_on_the_command_line(tmp_path):
    proc = run(["mneme-cxx", "--cuda-gpu-arch=sm_999", "-c", str(VARIANT), "-DVARIANT=1",
                "-o", str(tmp_path / "v.o")], check=False)
    one_line_error(proc, "sm_999")


def test_missing_toolkit(tmp_path):
    proc = run(["mneme-cxx", "-c", str(VARIANT), "-o", str(tmp_path / "v.o")],
               env=tool_env(CUDA_HOME=str(tmp_path)), check=False)
    one_line_error(proc, "mneme-cxx: error:", f"CUDA_HOME={tmp_path} is not a CUDA toolkit")


def test_mismatched_clang(tmp_path):
    # A stand-in for another clang major: the check reads -dumpversion.
    fake = tmp_path / "clang-14"
    fake.write_text("#!/bin/sh\necho 14.0.6\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    proc = run(["mneme-cxx", "-c", str(VARIANT), "-o", str(tmp_path / "v.o")],
               env=tool_env(MNEME_CLANG=str(fake)), check=False)
    one_line_error(proc, "is clang 14", "built for LLVM 22", "MNEME_CLANG")


def test_missing_clang(tmp_path):
    proc = run(["mneme-cc", "-c", str(HELLO)], env=tool_env(MNEME_CLANG=str(tmp_path / "nope")),
               check=False)
    one_line_error(proc, "mneme-cc: error: MNEME_CLANG=", "is not an executable")


def test_no_toolkit_anywhere(monkeypatch):
    monkeypatch.setattr(toolchain, "find_cuda_toolkit", lambda: None)
    with pytest.raises(toolchain.ToolchainError, match="no CUDA toolkit found.*set CUDA_HOME"):
        driver.clang_command("c++", ["-c", "a.cu"])


def test_plugin_not_built(monkeypatch):
    from mneme_cc.build_info import BuildInfo

    unbuilt = BuildInfo("0.1.0", None, None, 22, "", "")
    monkeypatch.setattr(toolchain, "build_info", lambda: unbuilt)
    with pytest.raises(toolchain.ToolchainError, match="plugin was not built.*llvm-22-dev"):
        driver.clang_command("c++", ["-c", "a.cu"])
    # Non-CUDA work does not need the plugin.
    assert driver.clang_command("c", ["-c", "m.c"])[1:] == ["-c", "m.c"]


def test_the_old_package_name_still_imports_with_a_warning():
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            "try:\n    import mneme_cc.build\nexcept DeprecationWarning as w:\n    print(w)\n"
            "warnings.simplefilter('ignore')\n"
            "import mneme_cc.build.nvcc, mneme_cc.drivers.nvcc\n"
            "from mneme_cc.build import read_embedded_modules\n"
            "print(mneme_cc.build.nvcc is mneme_cc.drivers.nvcc)\n")
    out = run([sys.executable, "-c", code]).stdout.splitlines()
    assert out == ["mneme_cc.build is now mneme_cc.drivers; the old name goes in the next release",
                   "True"]
