"""GPU tier (replay): recorded instances replay verified.

Each example is recorded, and every instance is replayed with the
application's own binary, with the recorded IR at its recorded settings,
and recompiled at O0..O3 with specialisation and launch bounds on and off.
A configuration may fail only when it says it changes the build's numerics
(declared, or found by the contraction probe); `mneme check` then finds
every instance reproduced.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import ARGS, EXAMPLE_NAMES, run, tool_env

from mneme_cc.record.db import RecordDB
from mneme_cc.replay import outcome as oc
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.judging import contraction_probe as probe
from mneme_cc.replay.running.replayer import Replayer

pytestmark = pytest.mark.gpu


def configs(inst) -> list[ReplayConfig]:
    quick = dict(iterations=3, warmup=1)
    out = [ReplayConfig(baseline="original", **quick), ReplayConfig(baseline="ir", **quick),
           ReplayConfig(flush_l2=True, **quick)]
    for level in range(4):
        out.append(ReplayConfig(pipeline=f"default<O{level}>", **quick))
        out.append(ReplayConfig(pipeline=f"default<O{level}>", specialize_args=inst.scalar_params(),
                                specialize_dims=True, launch_bounds=True, **quick))
    return out


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_every_instance_replays_verified(example_binaries, tmp_path, name):
    import json

    db_path = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db_path), "--", str(example_binaries / name),
         *ARGS[name]])
    failures = []
    for inst in RecordDB(db_path).instances:
        with Replayer(inst, cache_dir=tmp_path / "cache") as replayer:
            for config in configs(inst):
                result = replayer.replay(config)
                assert len(result.samples_ms) == 3 and result.min_ms > 0
                if not result.verified and result.numerics:
                    # A rounding change it said it would make (only an O0 pipeline
                    # against these -O3 builds is one), or one the contraction
                    # probe found: other products fused.
                    assert config.pipeline == "default<O0>" or \
                        result.numerics == [probe.REASON], result.numerics
                elif not result.verified:
                    failures.append((inst.kernel_name, config.baseline, config.pipeline,
                                     config.specialize_dims, result.mismatches[:2]))
    assert not failures, failures
    report = json.loads(run(["mneme", "check", "-rdb", str(db_path), "--json", "--iterations",
                             "2"], env=tool_env(MNEME_CACHE_DIR=str(tmp_path / "cache"))).stdout)
    assert report["totals"]["failed"] == 0, report


def test_a_broken_configuration_fails_verification_by_name(example_binaries, tmp_path):
    db_path = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db_path), "--", str(example_binaries / "tree_search"),
         *ARGS["tree_search"]])
    (inst,) = RecordDB(db_path).instances
    results = int(inst.arg_as(2, np.uint64))
    with Replayer(inst, cache_dir=tmp_path / "cache") as replayer:
        broken = replayer.replay(ReplayConfig(grid=(1, 1, 1), iterations=2, warmup=0))
        assert not broken.verified and broken.outcome == "failed_verification"
        names = [m.buffer for m in broken.mismatches]
        assert f"allocation {results:#x}" in names
        # The process goes on: the recorded geometry still verifies.
        assert replayer.replay(ReplayConfig(iterations=2, warmup=0)).verified


def test_cli_exit_statuses_and_json(example_binaries, tmp_path):
    import json

    db_path = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db_path), "--", str(example_binaries / "tree_search"),
         *ARGS["tree_search"]])
    (inst,) = RecordDB(db_path).instances
    env = tool_env(MNEME_CACHE_DIR=str(tmp_path / "cache"))
    ok = run(["mneme", "replay", "-rdb", str(db_path), "--iterations", "3", "default<O2>"],
             env=env)
    summary = json.loads(ok.stdout)
    assert summary["outcome"] == "verified" and len(summary["samples_ms"]) == 3
    assert summary["resources"]["registers"] > 0 and "ptxas" in summary["compile_seconds"]
    assert 0 < summary["occupancy"] <= 1 and summary["max_threads_per_block"] >= 256
    seed = run(["mneme-replay", "-rdb", str(db_path / f"{inst.static_hash}.json"),
                "-rid", inst.dynamic_hash, "--baseline", "original"])
    assert json.loads(seed.stdout)["outcome"] == "verified"
    broken = run(["mneme", "replay", "-rdb", str(db_path), "--grid", "1"], check=False)
    assert broken.returncode == 1
    assert json.loads(broken.stdout)["mismatches"][0]["buffer"].startswith("allocation 0x")


def test_policies_apply_per_buffer(example_binaries, tmp_path):
    """A tolerance on one argument's buffer excuses it; the others still count."""
    db_path = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db_path), "--", str(example_binaries / "tree_search"),
         *ARGS["tree_search"]])
    (inst,) = RecordDB(db_path).instances
    depths = int(inst.arg_as(3, np.uint64))
    loose = {"arg:2": {"dtype": "float32", "abs": 1e9}}  # results: anything goes
    with Replayer(inst, cache_dir=tmp_path / "cache") as replayer:
        result = replayer.replay(ReplayConfig(grid=(1, 1, 1), iterations=1, warmup=0,
                                              verify=loose))
    assert [m.buffer for m in result.mismatches] == [f"allocation {depths:#x}"]
    assert result.mismatches[0].count > 0


def test_emit_writes_what_ran(example_binaries, tmp_path):
    import json

    db_path = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db_path), "--", str(example_binaries / "vector_add")])
    out = run(["mneme", "replay", "-rdb", str(db_path), "--iterations", "1", "--specialize-args",
               "3", "--emit", str(tmp_path / "emitted")],
              env=tool_env(MNEME_CACHE_DIR=str(tmp_path / "cache")))
    assert json.loads(out.stdout)["outcome"] == "verified"
    (inst,) = RecordDB(db_path).instances
    ptx = (tmp_path / "emitted" / "kernel.ptx").read_text()
    # n (parameter 3) was specialised: declared, never loaded.
    assert f".entry {inst.kernel_name}(" in ptx and f"[{inst.kernel_name}_param_3]" not in ptx
    assert f"[{inst.kernel_name}_param_2]" in ptx
    assert f"@{inst.kernel_name}(" in (tmp_path / "emitted" / "kernel.ll").read_text()
    assert (tmp_path / "emitted" / "kernel.cubin").read_bytes()[:4] == b"\x7fELF"


def test_an_older_gpu_than_recorded_is_exit_2(example_binaries, tmp_path):
    import json

    db_path = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db_path), "--", str(example_binaries / "vector_add")])
    (entry,) = (db_path / "index").glob("*.json")
    data = json.loads(entry.read_text())
    data["device"]["arch"] = "sm_120"  # as if recorded on a newer GPU than this one
    entry.write_text(json.dumps(data))
    result = run(["mneme", "replay", "-rdb", str(db_path)], check=False)
    assert result.returncode == 2 and "older than the recorded sm_120" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_a_window_already_taken_is_a_clear_error(example_binaries, tmp_path):
    from mneme_cc.replay.running import device as dev

    db_path = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db_path), "--", str(example_binaries / "vector_add")])
    (inst,) = RecordDB(db_path).instances
    gpu = dev.Device(0)
    drv = dev._driver()
    base, size = inst.window["base"], inst.window["size"]
    # Something else in this process holds the recorded window.
    taken = dev.check(drv.cuMemAddressReserve(size, 0, base, 0), "reserving")
    try:
        assert int(taken) == base
        with pytest.raises(dev.DeviceError, match=rf"window \[{base:#x}, .* is not available"):
            with Replayer(inst, cache_dir=tmp_path / "cache"):
                pass
    finally:
        drv.cuMemAddressFree(taken, size)
        gpu.close()
    # Once it is free again, the same process replays.
    with Replayer(inst, cache_dir=tmp_path / "cache") as replayer:
        assert replayer.replay(ReplayConfig(iterations=1, warmup=0)).verified


@pytest.mark.parametrize("size,offset", [(1 << 20, 0), (1000003, 0), (4096, 3), (15, 0)])
def test_the_device_comparer_counts_like_numpy(size, offset):
    """The 16-byte and byte kernels together find every differing byte and the first."""
    from mneme_cc.replay.judging.gpu_compare import GpuComparer
    from mneme_cc.replay.running import device as dev

    rng = np.random.default_rng(size)
    a = rng.integers(0, 256, size, dtype=np.uint8)
    b = a.copy()
    planted = rng.choice(size, min(size, 37), replace=False)
    b[planted] ^= rng.integers(1, 256, planted.size, dtype=np.uint8)
    gpu = dev.Device(0)
    drv = dev._driver()
    buffers = [int(dev.check(drv.cuMemAlloc(size + 16), "allocating")) for _ in range(2)]
    try:
        # offset 3 leaves both buffers misaligned: the byte kernel alone runs.
        for buffer, data in zip(buffers, (a, b), strict=True):
            dev.copy_to_device(buffer + offset, data)
        comparer = GpuComparer(gpu)
        count, first = comparer.differing(buffers[0] + offset, buffers[1] + offset, size)
        assert (count, first) == (planted.size, int(planted.min()))
        assert comparer.differing(buffers[0] + offset, buffers[0] + offset, size) == (0, 2**64 - 1)
        comparer.close()
    finally:
        for buffer in buffers:
            drv.cuMemFree(buffer)
        gpu.close()


def test_the_device_comparer_counts_buffers_that_differ_everywhere_several_at_once():
    """A configuration that changes the numerics differs nearly everywhere:
    each warp's counts are summed before they reach the result, and every
    pair's result stays its own when several are compared in one wait."""
    from mneme_cc.replay.judging.gpu_compare import GpuComparer
    from mneme_cc.replay.running import device as dev

    size = 64 << 20
    rng = np.random.default_rng(7)
    a = rng.integers(0, 256, size, dtype=np.uint8)
    b = a ^ rng.integers(1, 256, size, dtype=np.uint8)  # every byte differs
    c = a.copy()
    c[size // 2:] = b[size // 2:]  # the second half differs
    gpu = dev.Device(0)
    drv = dev._driver()
    buffers = [int(dev.check(drv.cuMemAlloc(size), "allocating")) for _ in range(3)]
    try:
        for buffer, data in zip(buffers, (a, b, c), strict=True):
            dev.copy_to_device(buffer, data)
        comparer = GpuComparer(gpu)
        x, y, z = buffers
        found = comparer.differing_all([(x, y, size), (x, z, size), (x, x, size),
                                        (x + 1, y + 1, 4097), (y, z + 5, 999)])
        assert found[:4] == [(size, 0), (size // 2, size // 2), (0, 2**64 - 1), (4097, 0)]
        expected = b[:999] != c[5:1004]
        assert found[4] == (int(expected.sum()), int(np.argmax(expected)))
        comparer.close()
    finally:
        for buffer in buffers:
            drv.cuMemFree(buffer)
        gpu.close()


def test_a_failure_that_only_fuses_other_products_is_a_numerics_change(example_binaries,
                                                                       tmp_path):
    """tests/samples/record/contraction.cu: specialising `keep` fuses the
    other product; the probe finds the two equal with contraction off and
    says so. A planted miscompile in a pass list is no fusion: it stays a
    failure to bisect."""
    db_path = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db_path), "--", str(example_binaries / "contraction")])
    from mneme_cc.replay.compiling.numerics import codegen_of

    (inst,) = RecordDB(db_path).instances
    build = codegen_of(inst.db.kernel(inst.static_hash))  # -O2: the sample's build
    quick = dict(iterations=2, warmup=0)
    with Replayer(inst, cache_dir=tmp_path / "cache") as replayer:
        assert replayer.replay(build.baseline_config(**quick)).verified
        specialised = replayer.replay(build.baseline_config(specialize_args=(5,), **quick))
        assert not specialised.verified and specialised.numerics == [probe.REASON]
        assert specialised.failure.startswith("numerics-changing: fuses other multiply-adds")
        planted = replayer.replay(dataclasses.replace(
            build.baseline_config(**quick),
            pipeline="sroa,instcombine,mneme-drop-store,instcombine"))
        assert not planted.verified and planted.numerics == []
        assert "a miscompile" in planted.failure
        assert replayer.replay(ReplayConfig(baseline="ir", **quick)).verified
        full = specialised.mismatches[0]
        # What a study asks: a failure is neither timed nor measured, still explained.
        replayer.brief_failures = True
        brief = replayer.replay(build.baseline_config(specialize_args=(5,), **quick))
        assert brief.samples_ms == [] and brief.numerics == [probe.REASON]
        (mismatch,) = brief.mismatches
        assert mismatch.buffer == full.buffer and full.stats["max_ulp"] is not None
        assert mismatch.stats == {"unit": "byte", "bytes_differing": full.stats["bytes_differing"],
                                  "size": full.stats["size"]}
        # The first differing byte lies in the first differing element.
        assert full.stats["dtype"] == "float32"
        assert mismatch.first_indices[0] // 4 == full.first_indices[0]
        assert replayer.replay(build.baseline_config(**quick)).samples_ms


def test_a_study_leaves_a_probe_s_compiles_to_its_compile_processes(example_binaries,
                                                                   tmp_path):
    """A study's GPU worker does not compile a probe's variants, where the GPU
    would wait: the failure comes back pending, a compile process compiles
    them, and the probe alone runs on the GPU: explained, a numerics change;
    not explained, a failure to bisect."""
    from mneme_cc.replay.compiling.numerics import codegen_of
    from mneme_cc.tune.executor import ReplayExecutor

    db_path = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db_path), "--", str(example_binaries / "contraction")])
    (inst,) = RecordDB(db_path).instances
    build = codegen_of(inst.db.kernel(inst.static_hash))
    quick = dict(iterations=2, warmup=0)
    specialised = build.baseline_config(specialize_args=(5,), **quick)
    with Replayer(inst, cache_dir=tmp_path / "cache", compile_probes=False) as replayer:
        pending = replayer.replay(specialised)
        assert not pending.verified and pending.probe_pending and pending.numerics == []
        assert replayer.probe(specialised) == [probe.REASON]  # compiles what it lacks
        assert not replayer.replay(specialised).probe_pending  # in the cache now
    planted = dataclasses.replace(build.baseline_config(**quick),
                                  pipeline="sroa,instcombine,mneme-drop-store,instcombine")
    with ReplayExecutor(inst, devices=[0], compile_workers=2,
                        cache_dir=tmp_path / "study-cache") as executor:
        explained, unexplained = (executor.evaluate(c) for c in (specialised, planted))
    assert explained.outcome == oc.NUMERICS_CHANGING
    assert explained.error == f"numerics-changing: {probe.REASON}"
    assert explained.mismatches and explained.replay_seconds["probe"] > 0
    assert explained.compile_seconds["probe"] > 0  # waited on: the trial's own compile
    assert unexplained.outcome == oc.FAILED_VERIFICATION and "differ" in unexplained.error


def test_a_compile_process_asked_compiles_what_the_probe_would_run(example_binaries, tmp_path):
    """Once the probe explains failures, a compile process that compiled a
    trial may be asked for its probe's two compiles, so that the GPU
    worker's probe finds them in the cache."""
    from mneme_cc.replay.compiling.compiler import compile_instance
    from mneme_cc.replay.compiling.numerics import codegen_of
    from mneme_cc.tune.workers import Worker

    db_path = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db_path), "--", str(example_binaries / "contraction")])
    (inst,) = RecordDB(db_path).instances
    build = codegen_of(inst.db.kernel(inst.static_hash))
    config, cache = build.baseline_config(specialize_args=(5,)), tmp_path / "cache"
    worker = Worker(str(db_path), inst.name, str(cache))
    try:
        kind, (error, seconds, _) = worker.ask((config.to_json(), "sm_90", False), 120)
        assert kind == "reply" and not error and "optimize" in seconds and "probe" not in seconds
        assert not compile_instance(inst, probe.without_contraction(config), "sm_90", cache).cache_hit
        other = build.baseline_config(specialize_args=(6,))
        kind, (error, seconds) = worker.ask((other.to_json(), "sm_90", True), 120)
        assert kind == "reply" and not error and set(seconds) == {"probe"} and seconds["probe"] > 0
        for variant in (probe.without_contraction(other), probe.reference(build)):
            assert compile_instance(inst, variant, "sm_90", cache).cache_hit
        assert not compile_instance(inst, other, "sm_90", cache).cache_hit  # asked for the probe's only
        # Where the probe does not apply (the build's IR at its settings), nothing is compiled.
        kind, reply = worker.ask((ReplayConfig(baseline="ir").to_json(), "sm_90", True), 120)
        assert reply == ("", {})
    finally:
        worker.close()
