"""`mneme run --tuned`: the serving table, the launch-shape rules, the report,
damaged bundles and the CLI's errors (no GPU needed)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import run
from test_bundle import make_tuned

from mneme_cc.deploy import (
    KernelReport,
    RunReport,
    format_report,
    load_bundle,
    read_reports,
    serve_shape,
    write_table,
)
from mneme_cc.replay.config import ReplayConfig


def export(tmp_path: Path, config: ReplayConfig | None = None) -> tuple[Path, object]:
    db, inst = make_tuned(tmp_path, config)
    run(["mneme", "export", "-rdb", str(db), "--bundle", str(tmp_path / "b")])
    return tmp_path / "b", inst


def table_entries(table) -> list[list[str]]:
    return [line.split("\t") for line in table.path.read_text().splitlines()
            if line.startswith("entry\t")]


def test_the_table_carries_each_entry_and_a_private_copy_of_its_checked_cubin(tmp_path):
    path, inst = export(tmp_path)
    bundle = load_bundle(path)
    (entry,) = bundle.entries
    table = write_table(bundle, nearest=True, time_all=True)
    try:
        lines = table.path.read_text().splitlines()
        assert lines[:4] == ["mneme-serve\t1", "nearest\t1", "time-all\t1",
                             f"report\t{table.directory}"]
        ((_, kernel, arch, ir, grid, block, smem, sgrid, sblock, ssmem, cubin, dims, args),) = \
            table_entries(table)
        assert (kernel, arch, ir) == (inst.kernel_name, "sm_90", entry.ir_sha256)
        assert (grid, block, smem) == ("4,1,1", "256,1,1", "0") == (sgrid, sblock, ssmem)
        assert (dims, args) == ("0", "-")
        assert Path(cubin).read_bytes() == bundle.cubin(entry)
        assert Path(cubin).parent.parent == table.directory
        assert stat.S_IMODE(table.directory.stat().st_mode) == 0o700
        assert not table.warnings
    finally:
        table.close()
    assert not table.directory.exists()


def test_specialised_arguments_travel_with_the_entry(tmp_path):
    path, inst = export(tmp_path, ReplayConfig(pipeline="default<O2>", specialize_args=(3,),
                                               specialize_dims=True))
    bundle = load_bundle(path)
    (entry,) = bundle.entries
    assert entry.specialized_args == [{"index": 3, "hex": inst.arg(3).hex()}]
    table = write_table(bundle)
    try:
        ((*_, dims, args),) = table_entries(table)
        assert (dims, args) == ("1", f"3:{inst.arg(3).hex()}")
    finally:
        table.close()
    # A bundle that does not record the values cannot serve the entry.
    manifest = path / "manifest.json"
    raw = json.loads(manifest.read_text())
    raw["kernels"][0]["specialized_args"] = []
    manifest.write_text(json.dumps(raw))
    table = write_table(load_bundle(path))
    try:
        (warning,) = table.warnings
        assert "argument values the bundle does not record" in warning
        assert table_entries(table)[0][10].startswith("!")
    finally:
        table.close()


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_a_damaged_cubin_passes_through_with_a_one_line_warning_naming_it(tmp_path, damage):
    path, inst = export(tmp_path)
    bundle = load_bundle(path)
    (entry,) = bundle.entries
    cubin = path / entry.cubin
    if damage == "corrupt":
        cubin.write_bytes(b"\x7fELF garbage")
    else:
        cubin.unlink()
    table = write_table(bundle)
    try:
        (warning,) = table.warnings
        assert "\n" not in warning and str(cubin) in warning
        assert "its launches pass through" in warning and inst.demangled in warning
        marked = table_entries(table)[0][10]
        assert marked.startswith("!") and str(cubin) in marked
        assert not list((table.directory / "cubins").iterdir())
    finally:
        table.close()


def test_serving_shapes_exact_and_nearest(tmp_path):
    path, _ = export(tmp_path)
    (entry,) = load_bundle(path).entries
    grid, block = (4, 1, 1), (256, 1, 1)
    assert serve_shape(entry, grid, block, 0, exact=True)[0] == (grid, block, 0)
    # Nearest keeps the launch's own shape when tuning kept the geometry.
    assert serve_shape(entry, (40, 1, 1), block, 0, exact=False)[0] == ((40, 1, 1), block, 0)
    # A tuned block carries over when it kept the recorded threads.
    tuned = replace(entry, serve={"grid": [2, 1, 1], "block": [512, 1, 1],
                                  "shared_mem_bytes": 0})
    assert serve_shape(tuned, (40, 1, 1), block, 0, exact=False)[0] == \
        ((20, 1, 1), (512, 1, 1), 0)
    shape, why = serve_shape(tuned, (3, 1, 1), block, 0, exact=False)
    assert shape is None and "does not carry over" in why
    regridded = replace(entry, serve={"grid": [8, 1, 1], "block": [512, 1, 1],
                                      "shared_mem_bytes": 0})
    assert serve_shape(regridded, (40, 1, 1), block, 0, exact=False)[0] is None
    smem = replace(entry, serve={**entry.serve, "shared_mem_bytes": 1024})
    assert serve_shape(smem, (40, 1, 1), block, 0, exact=False)[0] == \
        ((40, 1, 1), block, 1024)
    assert serve_shape(smem, (40, 1, 1), block, 64, exact=False)[0] is None
    # Spread over a flat block, y threads would need more y blocks than CUDA allows.
    flat = replace(entry, launch={"grid": [4, 8, 2], "block": [16, 8, 4], "shared_mem_bytes": 0},
                   serve={"grid": [2, 64, 8], "block": [32, 1, 1], "shared_mem_bytes": 0})
    assert serve_shape(flat, (4, 8000, 2), (16, 8, 4), 0, exact=False)[0] == \
        ((2, 64000, 8), (32, 1, 1), 0)
    shape, why = serve_shape(flat, (4, 9000, 2), (16, 8, 4), 0, exact=False)
    assert shape is None and "does not carry over" in why
    dims = replace(entry, config={**entry.config, "specialize_dims": True})
    assert "specialised on its own launch shape" in serve_shape(
        dims, (40, 1, 1), block, 0, exact=False)[1]


def test_bundle_fields_the_runtime_reads_are_checked(tmp_path):
    from mneme_cc.errors import UsageError

    path, _ = export(tmp_path)
    manifest = path / "manifest.json"
    raw = json.loads(manifest.read_text())
    for field, value in (("kernel", "bad\tname"), ("arch", "sm90"), ("ir_sha256", "0" * 63),
                         ("specialized_args", [{"index": -1, "hex": "00"}]),
                         ("specialized_args", [{"index": 0, "hex": "0"}])):
        manifest.write_text(json.dumps({**raw, "kernels": [{**raw["kernels"][0],
                                                            field: value}]}))
        with pytest.raises(UsageError, match=field):
            load_bundle(path)


def test_the_runtime_sha256_is_hashlib_s():
    from mneme_cc import _native

    for n in (0, 1, 55, 56, 63, 64, 65, 119, 120, 4096, 100_003):
        data = bytes((i * 7 + 3) & 255 for i in range(n))
        assert _native.sha256(data) == hashlib.sha256(data).hexdigest()


def fake_report(directory: Path, pid: int, kernels: list[dict]) -> None:
    (directory / f"serve-report.{pid}.json").write_text(json.dumps(
        {"format": "mneme-serve-report", "version": 1, "pid": pid, "kernels": kernels}))


def test_reports_of_every_process_are_merged_per_kernel(tmp_path):
    tuned = {"kernel": "_Z1kv", "demangled": "k()", "tuned": True, "launches": 10,
             "served": 8, "passed_through": {"no entry for this launch shape": 2},
             "served_ms": 1.5, "passed_through_ms": 0.5, "timed_served": 8,
             "timed_passed_through": 2}
    other = {"kernel": "_Z1jv", "demangled": "j()", "tuned": False, "launches": 3,
             "served": 0, "passed_through": {"not tuned": 3}, "served_ms": 0,
             "passed_through_ms": 0, "timed_served": 0, "timed_passed_through": 0}
    fake_report(tmp_path, 1, [tuned, other])
    fake_report(tmp_path, 2, [tuned])
    (tmp_path / "serve-report.3.json").write_text("{")
    kernels, processes, warnings = read_reports(tmp_path, {"_Z1kv": "k()", "_Z1lv": "l()"})
    assert processes == 2 and len(warnings) == 1 and "unreadable" in warnings[0]
    by = {k.kernel: k for k in kernels}
    assert (by["_Z1kv"].launches, by["_Z1kv"].served, by["_Z1kv"].kernel_ms) == (20, 16, 4.0)
    assert by["_Z1kv"].passed_through == {"no entry for this launch shape": 4}
    assert by["_Z1jv"].kernel_ms is None and by["_Z1jv"].passed_through == {"not tuned": 3}
    assert by["_Z1lv"].launches == 0 and by["_Z1lv"].tuned  # tuned, never launched
    assert [k.tuned for k in kernels] == [True, True, False]
    report = RunReport(bundle="b", match="exact", command=["app"], exit_status=3,
                       kernels=kernels, processes=processes)
    doc = report.to_dict()
    assert doc["format"] == "mneme-run-report" and doc["exit_status"] == 3
    assert doc["kernels"][0] == {**by["_Z1kv"].__dict__, "kernel_ms": 4.0}
    lines = format_report(report)
    assert lines[0].startswith("mneme run: 16 of 20 launch(es) of 2 tuned kernel(s) served")
    assert any(line.startswith("k()") and "4 no entry for this launch shape" in line
               for line in lines)
    assert any(line.startswith("j()") and line.split()[3] == "-" for line in lines)


def test_a_kernel_report_without_timed_launches_has_no_time():
    assert KernelReport("k", "k", True, launches=2).kernel_ms is None


def test_mneme_run_gives_the_application_its_exit_status_and_writes_the_report(tmp_path):
    path, inst = export(tmp_path)
    report = tmp_path / "report.json"
    out = run(["mneme", "run", "--tuned", str(path), "--report", str(report), "--",
               "sh", "-c", "echo hello; exit 3"], check=False)
    assert out.returncode == 3 and out.stdout == "hello\n"
    # The runtime read the table at exit (a damaged one would say so).
    assert "malformed" not in out.stderr and "error" not in out.stderr
    doc = json.loads(report.read_text())
    assert doc["exit_status"] == 3 and doc["processes"] == 0  # no CUDA process
    (kernel,) = doc["kernels"]
    assert (kernel["kernel"], kernel["launches"], kernel["tuned"]) == (inst.kernel_name, 0, True)
    assert "0 of 0 launch(es) of 1 tuned kernel(s) served" in out.stderr
    assert "the application wrote no report" in out.stderr


def test_the_runtime_says_in_one_line_when_the_table_is_damaged(tmp_path):
    from mneme_cc.deploy.run import environment

    table = tmp_path / "t.tsv"
    for text, message in (("nonsense\n", "not a version 1 serving table"),
                          ("mneme-serve\t1\nentry\tk\n", "t.tsv:2: malformed line")):
        table.write_text(text)
        out = run(["true"], env=environment(table), check=False)
        assert out.returncode == 0 and out.stderr.count("\n") == 1
        assert message in out.stderr and "every launch passes through" in out.stderr


def test_an_empty_bundle_runs_the_application_untouched(tmp_path):
    path = tmp_path / "empty"
    path.mkdir()
    (path / "manifest.json").write_text(json.dumps(
        {"format": "mneme-bundle", "version": 1, "kernels": []}))
    out = run(["mneme", "run", "-q", "--tuned", str(path), "--", "true"])
    assert out.stderr == "" and out.stdout == ""


def test_an_application_ended_by_a_signal_exits_as_a_shell_reports_it(tmp_path):
    path = tmp_path / "empty"
    path.mkdir()
    (path / "manifest.json").write_text(json.dumps(
        {"format": "mneme-bundle", "version": 1, "kernels": []}))
    out = run(["mneme", "run", "--tuned", str(path), "--", "sh", "-c", "kill -TERM $$"],
              check=False)
    assert out.returncode == 128 + 15
    assert "the application wrote no report" in out.stderr


@pytest.mark.parametrize("case", ["missing", "file", "manifest", "json", "no-app",
                                  "no-program", "report-dir", "match", "no-tuned"])
def test_cli_errors_are_one_line_and_exit_2(tmp_path, case):
    bundle = tmp_path / "b"
    bundle.mkdir()
    manifest = bundle / "manifest.json"
    manifest.write_text(json.dumps({"format": "mneme-bundle", "version": 1, "kernels": []}))
    args, expect = {
        "missing": (["--tuned", str(tmp_path / "nope"), "--", "true"], "no such bundle"),
        "file": (["--tuned", str(manifest), "--", "true"], "not a directory"),
        "manifest": (["--tuned", str(tmp_path), "--", "true"], "not a bundle"),
        "json": (["--tuned", str(bundle), "--", "true"], "unreadable"),
        "no-app": (["--tuned", str(bundle)], "no application given"),
        "no-program": (["--tuned", str(bundle), "--", str(tmp_path / "app")],
                       "no such program"),
        "report-dir": (["--tuned", str(bundle), "--report", str(tmp_path / "x" / "r.json"),
                        "--", "true"], "cannot be written"),
        "match": (["--tuned", str(bundle), "--match", "closest", "--", "true"],
                  "invalid choice: 'closest'"),
        "no-tuned": (["--", "true"], "--tuned"),
    }[case]
    if case == "json":
        manifest.write_text("{")
    out = run(["mneme", "run", *args], check=False)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("mneme: error: ")
    assert expect in out.stderr and "Traceback" not in out.stderr


def test_the_preloaded_runtime_comes_first_and_keeps_the_users_entries(tmp_path):
    from mneme_cc.deploy.run import environment

    env = environment(tmp_path / "t", {"LD_PRELOAD": "/x/libuser.so", "MNEME_RDB": "db"})
    first, second = env["LD_PRELOAD"].split(":")
    assert Path(first).name.startswith("libmneme_record") and second == "/x/libuser.so"
    assert env["MNEME_SERVE"] == str(tmp_path / "t") and "MNEME_RDB" not in env
    assert os.environ.get("MNEME_SERVE") is None


@pytest.fixture
def decide(tmp_path):
    """The runtime's matching (ServeTable.cpp) built into a small program."""
    from mneme_cc.drivers.toolchain import find_cuda_toolkit

    toolkit = find_cuda_toolkit()
    if toolkit is None:
        pytest.skip("no CUDA toolkit: the runtime's headers are missing")
    root = Path(__file__).parents[2]
    program = tmp_path / "decide"
    run(["g++", "-std=c++17", "-O1", f"-I{toolkit / 'include'}", f"-I{root / 'runtime/recorder'}",
         str(root / "tests/samples/serve/decide.cpp"),
         str(root / "runtime/recorder/ServeTable.cpp"), "-o", str(program)])
    return program


def dims3(text: str) -> tuple[int, int, int]:
    x, y, z = (int(v) for v in text.split(","))
    return x, y, z


@pytest.mark.parametrize("nearest", [False, True])
def test_the_runtime_matches_launches_as_the_python_rules_do(tmp_path, decide, nearest):
    path, inst = export(tmp_path)
    manifest = path / "manifest.json"
    raw = json.loads(manifest.read_text())
    (base,) = raw["kernels"]

    def entry(grid, block, smem, serve=None, **config):
        launch = {"grid": grid, "block": block, "shared_mem_bytes": smem}
        return {**base, "launch": launch, "serve": serve or launch,
                "config": {**base["config"], **config}}

    raw["kernels"] = [
        entry([4, 1, 1], [256, 1, 1], 0),
        entry([64, 1, 1], [256, 1, 1], 0, {"grid": [32, 1, 1], "block": [512, 1, 1],
                                           "shared_mem_bytes": 0}),
        entry([8, 1, 1], [128, 1, 1], 1024, {"grid": [8, 1, 1], "block": [128, 1, 1],
                                             "shared_mem_bytes": 2048}),
        entry([1000, 1, 1], [64, 1, 1], 0, specialize_dims=True),
        entry([4, 4, 1], [16, 16, 1], 0),
        # A 3-D launch tuned to a flat block: a nearby launch spreads its y
        # threads over y blocks, which CUDA allows up to 65535.
        entry([4, 8, 2], [16, 8, 4], 0, {"grid": [2, 64, 8], "block": [32, 1, 1],
                                         "shared_mem_bytes": 0}),
    ]
    manifest.write_text(json.dumps(raw))
    bundle = load_bundle(path)
    launches = [(inst.kernel_name, g, b, s) for g, b, s in (
        ((4, 1, 1), (256, 1, 1), 0), ((64, 1, 1), (256, 1, 1), 0), ((8, 1, 1), (128, 1, 1), 1024),
        ((1000, 1, 1), (64, 1, 1), 0), ((40, 1, 1), (256, 1, 1), 0), ((63, 1, 1), (256, 1, 1), 0),
        ((3, 1, 1), (256, 1, 1), 0), ((9, 1, 1), (128, 1, 1), 1024), ((9, 1, 1), (128, 1, 1), 0),
        ((900, 1, 1), (64, 1, 1), 0), ((8, 8, 1), (16, 16, 1), 0), ((5, 1, 1), (1024, 1, 1), 0),
        ((2, 1, 1), (32, 1, 1), 0), ((4, 8, 2), (16, 8, 4), 0), ((4, 8000, 2), (16, 8, 4), 0),
        ((4, 9000, 2), (16, 8, 4), 0))] + [("_Z5otherv", (1, 1, 1), (32, 1, 1), 0)]
    table = write_table(bundle, nearest=nearest)
    try:
        text = "".join(f"{k} {_dims(g)} {_dims(b)} {s}\n" for k, g, b, s in launches)
        answers = run([str(decide), str(table.path)], input=text).stdout.splitlines()
    finally:
        table.close()
    assert len(answers) == len(launches)
    for (kernel, grid, block, smem), answer in zip(launches, answers, strict=True):
        chosen, why = bundle.match(kernel, "sm_90", base["ir_sha256"], grid, block, smem,
                                   nearest=nearest)
        if chosen is not None:
            shape, why = serve_shape(chosen, grid, block, smem,
                                     exact=chosen.shape() == (grid, block, smem))
        if chosen is None or shape is None:
            assert answer == f"pass {why}", (grid, block, smem)
            continue
        verb, g, b, s, cubin = answer.split()
        assert (verb, dims3(g), dims3(b), int(s)) == ("serve", *shape), (grid, block, smem)
        assert bundle.entries[int(Path(cubin).stem)] == chosen


def _dims(d) -> str:
    return ",".join(map(str, d))
