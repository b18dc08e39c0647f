"""The `mneme` CLI: inspect and config, driven through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SAMPLES, run, tool_env
from typer.testing import CliRunner

from mneme_cc.build_info import build_info
from mneme_cc.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def variant_object(tmp_path_factory) -> Path:
    obj = tmp_path_factory.mktemp("cli") / "v.o"
    run(["mneme-cxx", "-O0", "-DVARIANT=7", "-c", str(SAMPLES / "variant.cu"), "-o", str(obj)])
    return obj


def test_inspect_lists_kernels_on_a_terminal(variant_object):
    result = runner.invoke(app, ["inspect", str(variant_object)])
    assert result.exit_code == 0, result.output
    assert "_Z9variant_7Pi" in result.output
    assert "variant_7(int*)" in result.output
    assert "sm_90" in result.output


def test_inspect_prints_names_from_the_binary_as_they_are(tmp_path):
    """A source path with brackets is text, not Rich markup."""
    source = tmp_path / "[bold]k[red].cu"
    source.write_text("template <int N> __global__ void k(int *x) { x[0] = N; }\n"
                      "template __global__ void k<3>(int *);\n")
    obj = tmp_path / "k.o"
    run(["mneme-cxx", "-c", str(source), "-o", str(obj)])
    result = runner.invoke(app, ["inspect", str(obj)])
    assert result.exit_code == 0, result.output
    assert "[bold]k[red].cu" in result.output


def test_inspect_extract_writes_bitcode_and_metadata(variant_object, tmp_path):
    result = runner.invoke(app, ["inspect", str(variant_object), "--extract", str(tmp_path / "x"),
                                 "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    (bc,) = report["extracted"]
    assert Path(bc).name == "variant.sm_90.bc"
    assert Path(bc).read_bytes()[:4] == b"BC\xc0\xde"
    meta = json.loads(Path(bc).with_suffix(".json").read_text())
    assert meta["kernels"] == [{"name": "_Z9variant_7Pi", "demangled": "variant_7(int*)"}]


def test_inspect_a_file_without_ir_says_so(tmp_path):
    exe = tmp_path / "hello"
    run(["mneme-cc", str(SAMPLES / "plain" / "hello.c"), "-o", str(exe)])
    result = runner.invoke(app, ["inspect", str(exe)])
    assert result.exit_code == 1
    assert "carries no embedded IR and no device images" in result.output


@pytest.mark.parametrize("target, message", [
    (SAMPLES / "variant.cu", "is not an ELF file or archive"),
    (SAMPLES / "missing.o", "does not exist"),
    (SAMPLES, "is a directory"),
    (Path("/dev/zero"), "not a regular file"),
])
def test_inspect_bad_input_is_one_line_and_exit_2(target, message):
    proc = run(["mneme", "inspect", str(target)], check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_version_names_the_llvm_and_cuda_the_parts_were_built_with():
    result = runner.invoke(app, ["--version"])
    first, *parts = result.output.strip().splitlines()
    assert result.exit_code == 0 and first == f"mneme-cc {build_info().version}"
    # This machine builds both (the suite needs them).
    assert parts[0].startswith("pass plugin: built against LLVM 22.")
    assert parts[1].startswith("recorder: built with the CUDA 13.")


def test_standalone_inspect_tool_matches(variant_object):
    proc = run(["mneme-inspect", "--json", str(variant_object)])
    assert json.loads(proc.stdout)["modules"][0]["kernels"][0]["name"] == "_Z9variant_7Pi"


def test_config_values():
    def value(what: str) -> str:
        result = runner.invoke(app, ["config", what])
        assert result.exit_code == 0, result.output
        return result.output.strip()

    assert value("version") == build_info().version
    assert Path(value("plugin")).name == "libMnemePasses.so"
    assert (Path(value("cmakedir")) / "mnemeConfig.cmake").is_file()
    assert Path(value("cxx")).name == "mneme-cxx"
    assert "-fpass-plugin=" in value("cflags")
    assert "-lcudart" in value("ldflags")
    assert runner.invoke(app, ["config", "bogus"]).exit_code == 2


def test_cflags_make_plain_clang_builds_recordable(tmp_path):
    """`mneme config cflags/ldflags` with plain clang-22, for other build systems."""
    import shlex

    from mneme_cc.drivers import toolchain

    cflags = shlex.split(run(["mneme", "config", "cflags"]).stdout)
    ldflags = shlex.split(run(["mneme", "config", "ldflags"]).stdout)
    exe = tmp_path / "app"
    sources = [str(SAMPLES / "multi" / p) for p in ("app/main.cu", "scale/kernels.cu",
                                                     "stencil/kernels.cu")]
    run([toolchain.select_clang(), "--driver-mode=g++", *cflags, "--cuda-gpu-arch=sm_90",
         *sources, "-o", str(exe), *ldflags])
    result = runner.invoke(app, ["inspect", "--json", str(exe)])
    assert len(json.loads(result.output)["modules"]) == 3
    assert "libcudart.so" in run(["readelf", "-d", str(exe)]).stdout


def _typer_flags(name: str) -> dict:
    import typer.main

    from mneme_cc.cli.typer_app import app

    command = typer.main.get_command(app).commands[name]
    flags = {opt: param for param in command.params
             for opt in (*param.opts, *param.secondary_opts) if opt.startswith("-")}
    flags.pop("--help", None)
    return flags


def test_run_parses_its_options_as_typer_does():
    """A plain `mneme run` skips typer; both parses take the same options."""
    from mneme_cc.cli import run_command

    fast = {opt: action for action in run_command.parser()._actions
            for opt in action.option_strings if opt not in ("-h", "--help")}
    full = _typer_flags("run")
    assert set(fast) == set(full)
    for opt, action in fast.items():
        default = full[opt].default
        assert action.default == getattr(default, "value", default), opt
        assert action.required == full[opt].required, opt


def test_record_s_launcher_takes_typer_s_flags():
    """A plain `mneme record` is its native launcher's parse; typer's the help."""
    env = tool_env(MNEME_RECORD_LIST_FLAGS="1")
    listed = run([str(build_info().launcher)], env=env).stdout.split()
    assert set(listed) == set(_typer_flags("record"))


def test_help_is_mneme_s_only_before_the_application():
    from mneme_cc.cli import _asks_for_help

    assert _asks_for_help(["-rdb", "db", "--help"])
    assert _asks_for_help(["--kernels=x", "-v", "-h", "--", "app"])
    assert not _asks_for_help(["-rdb", "db", "app", "--help"])  # the application's
    assert not _asks_for_help(["-rdb", "db", "--", "app", "-h"])
    assert not _asks_for_help(["--tuned", "b", "-q", "app", "-h"])


def test_help_of_record_and_run_is_typer_s():
    for name in ("record", "run"):
        shown = run(["mneme", name, "--help"]).stdout
        assert "Usage: mneme " + name in shown and "-- APP [ARGS...]" in shown


def test_record_and_run_through_typer(tmp_path):
    """The typer commands run as the fast parse does (a program, its exit status)."""
    runner = CliRunner()
    db = tmp_path / "db"
    result = runner.invoke(app, ["record", "-rdb", str(db), "--", "sh", "-c", "exit 3"])
    assert result.exit_code == 3 and (db / "database.json").is_file()
    result = runner.invoke(app, ["run", "--tuned", str(tmp_path / "nothing"), "--", "true"])
    assert result.exit_code == 2
