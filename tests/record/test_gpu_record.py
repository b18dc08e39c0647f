"""GPU tier: record every example and check each stored instance on the host.

For every recorded instance the test recomputes, with numpy and from the
examples' definitions alone, what the prologue must hold (inputs, device
globals, argument bytes) and what the epilogue must hold (the kernel's
outputs), and compares them with the database's contents.  Where the
examples use exact arithmetic (small integers, power-of-two weights) the
comparison is bitwise; the conjugate-gradient kernels (true floating-point
sums) are compared to 1e-12 relative.  The application's output must be
identical with and without the recorder.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import ARGS, run, tool_env

from mneme_cc.record.db import RecordDB

pytestmark = pytest.mark.gpu

#: Small problem sizes: every example records in well under a second.


def record(binaries: Path, name: str, db: Path, *flags: str, args=None, check=True):
    """Runs the example natively and recorded; returns (native, recorded) processes."""
    cmd = [str(binaries / name), *(ARGS.get(name, []) if args is None else args)]
    native = run(cmd)
    recorded = run(["mneme", "record", "-rdb", str(db), *flags, "--", *cmd], check=check)
    return native, recorded


def recorded_db(binaries: Path, name: str, tmp_path: Path) -> RecordDB:
    """Records an example with default options; its output must not change."""
    native, recorded = record(binaries, name, tmp_path / "db")
    assert recorded.stdout == native.stdout
    db = RecordDB(tmp_path / "db")
    check_common(db)
    return db


def pointer(inst, index: int) -> int:
    return int(inst.arg_as(index, np.uint64))


def buffer(snapshot, address: int, dtype, count: int | None = None) -> np.ndarray:
    """The array at a device address (which may lie inside an allocation)."""
    for region in snapshot.allocations:
        if region.address <= address < region.address + max(region.size, 1):
            data = region.array(np.uint8)[address - region.address:]
            out = data[: len(data) // np.dtype(dtype).itemsize * np.dtype(dtype).itemsize]
            out = out.view(dtype)
            return out if count is None else out[:count]
    raise AssertionError(f"{address:#x} is in no recorded allocation")


def check_common(db: RecordDB) -> None:
    """What holds for every instance of every example."""
    assert db.incomplete == []
    for inst in db.instances:
        assert inst.replayable, inst.reasons
        inst.verify()  # every checksum, every chunk's content hash (GPU == CPU hash)
        assert inst.device["arch"].startswith("sm_")
        assert inst.window["base"] == 0x200000000000
        regions = inst.prologue.allocations
        for r in regions:
            assert inst.window["base"] <= r.address < inst.window["base"] + inst.window["size"]
        # Argument bytes: the sizes the kernel's signature gives; whatever
        # points into the window points into a recorded allocation.
        assert sum(p["size"] for p in inst.params) <= len(inst.args)
        base, size = inst.window["base"], inst.window["size"]
        for i, p in enumerate(inst.params):
            if p["size"] == 8:
                v = pointer(inst, i)
                if base <= v < base + size:
                    assert any(r.address <= v < r.address + r.size for r in regions), hex(v)
        # The epilogue lists only chunks that changed.
        for before, after in zip(inst.prologue.regions[:-1], inst.epilogue.regions, strict=True):
            for index, digest in after.chunks.items():
                assert before.chunks[index] != digest
    for kernel in db.kernels:
        assert kernel.has_ir and kernel.bitcode()[:2] == b"BC"
        assert kernel.image()[:4] == bytes.fromhex("50ed55ba")  # the app's fatbinary


def test_vector_add(example_binaries, tmp_path):
    db = recorded_db(example_binaries, "vector_add", tmp_path)
    (inst,) = db.instances
    n = 1000000
    i = np.arange(n)
    a = (i % 1024).astype(np.float32)
    b = (((3 * i) % 512) * 0.5).astype(np.float32)
    assert inst.arg_as(3, np.int32) == n
    assert (inst.grid, inst.block) == ((1024, 1, 1), (256, 1, 1))
    pa, pb, pc = (pointer(inst, k) for k in range(3))
    assert np.array_equal(buffer(inst.prologue, pa, np.float32, n), a)
    assert np.array_equal(buffer(inst.prologue, pb, np.float32, n), b)
    assert np.array_equal(buffer(inst.epilogue, pc, np.float32, n), a + b)
    assert sorted(r.size for r in inst.prologue.allocations) == [4 * n] * 3
    changed = [r for r in inst.epilogue.allocations if r.chunks]
    assert [r.address for r in changed] == [pc]


def cg_matrix(N: int):
    """The CSR matrix cg.cu generates, built independently with numpy."""
    n = N ** 3
    idx = np.arange(n).reshape(N, N, N)  # [k, j, i]
    k, j, i = np.meshgrid(np.arange(N), np.arange(N), np.arange(N), indexing="ij")
    coupling = lambda a, b: 1.0 + ((a + b) % 7) * 0.125  # noqa: E731
    diag = np.zeros((N, N, N))
    entries = []
    for dk, dj, di in ((-1, 0, 0), (0, -1, 0), (0, 0, -1), (0, 0, 1), (0, 1, 0), (1, 0, 0)):
        kk, jj, ii = k + dk, j + dj, i + di
        inside = (kk >= 0) & (jj >= 0) & (ii >= 0) & (kk < N) & (jj < N) & (ii < N)
        nb = np.where(inside, (kk * N + jj) * N + ii, 0)
        c = coupling(idx, nb)
        diag += np.where(inside, c, 1.0)
        entries.append((inside, nb, -c))
    rows = np.concatenate([idx[inside] for inside, _, _ in entries] + [idx.ravel()])
    cols = np.concatenate([nb[inside] for inside, nb, _ in entries] + [idx.ravel()])
    vals = np.concatenate([c[inside] for inside, _, c in entries] + [diag.ravel()])
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    rowptr = np.searchsorted(rows, np.arange(n + 1)).astype(np.int32)
    return rowptr, cols.astype(np.int32), vals


def csr_matvec(rowptr, col, val, x):
    return np.add.reduceat(val * x[col], rowptr[:-1])


def test_cg(example_binaries, tmp_path):
    db = recorded_db(example_binaries, "cg", tmp_path)
    N = 12
    n = N ** 3
    rowptr, col, val = cg_matrix(N)
    close = dict(rtol=1e-12, atol=1e-300)
    names = {k.demangled.split("(")[0]: k for k in db.kernels}
    assert set(names) == {"spmv", "dot_partial", "sum_partials", "axpy", "xpay"}
    assert len(names["axpy"].instances) == 4 and len(names["xpay"].instances) == 4
    for inst in names["spmv"].instances:
        assert inst.arg_as(0, np.int32) == n
        pr, pc, pv, px, py = (pointer(inst, k) for k in range(1, 6))
        assert np.array_equal(buffer(inst.prologue, pr, np.int32, n + 1), rowptr)
        assert np.array_equal(buffer(inst.prologue, pc, np.int32, len(col)), col)
        assert np.array_equal(buffer(inst.prologue, pv, np.float64, len(val)), val)
        x = buffer(inst.prologue, px, np.float64, n)
        np.testing.assert_allclose(buffer(inst.epilogue, py, np.float64, n),
                                   csr_matvec(rowptr, col, val, x), **close)
    for inst in names["dot_partial"].instances:
        pa, pb, pp = (pointer(inst, k) for k in range(1, 4))
        a, b = buffer(inst.prologue, pa, np.float64, n), buffer(inst.prologue, pb, np.float64, n)
        partial = buffer(inst.epilogue, pp, np.float64, 1024)
        expected = np.zeros(1024)
        blocks = np.arange(n) // 256  # one element per thread at this size
        np.add.at(expected, blocks, a * b)
        np.testing.assert_allclose(partial, expected, **close)
    for inst in names["sum_partials"].instances:
        pp, pr = pointer(inst, 1), pointer(inst, 2)
        partial = buffer(inst.prologue, pp, np.float64, 1024)
        np.testing.assert_allclose(buffer(inst.epilogue, pr, np.float64, 1)[0], partial.sum(),
                                   **close)
    for inst in names["axpy"].instances + names["xpay"].instances:
        scalar = inst.arg_as(1, np.float64)
        px, py = pointer(inst, 2), pointer(inst, 3)
        x, y = buffer(inst.prologue, px, np.float64, n), buffer(inst.prologue, py, np.float64, n)
        expected = y + scalar * x if inst.kernel_name.startswith("_Z4axpy") else x + scalar * y
        np.testing.assert_allclose(buffer(inst.epilogue, py, np.float64, n), expected, **close)
    # The very first dot sees r = b = 1.
    first = min(names["dot_partial"].instances, key=lambda i: i.launch_index)
    assert np.array_equal(buffer(first.prologue, pointer(first, 1), np.float64, n), np.ones(n))


def stencil(a: np.ndarray, weights, scale) -> np.ndarray:
    out = a.copy()
    w = [float(x) for x in weights]
    c = a[1:-1, 1:-1, 1:-1]
    s = (w[0] * c + w[1] * a[1:-1, 1:-1, :-2] + w[2] * a[1:-1, 1:-1, 2:]
         + w[3] * a[1:-1, :-2, 1:-1] + w[4] * a[1:-1, 2:, 1:-1]
         + w[5] * a[:-2, 1:-1, 1:-1] + w[6] * a[2:, 1:-1, 1:-1])
    out[1:-1, 1:-1, 1:-1] = s * float(scale)
    return out


def test_stencil3d(example_binaries, tmp_path):
    db = recorded_db(example_binaries, "stencil3d", tmp_path)
    N = 16
    weights = np.array([0.5, 0.125, 0.125, 0.125, 0.125, 0.0625, 0.0625], np.float32)
    kinds = {}
    for kernel in db.kernels:
        dtype = np.float32 if "<float, 1>" in kernel.demangled else np.float64
        kinds[dtype] = len(kernel.instances)
        for inst in kernel.instances:
            assert inst.grid == (2, 2, 4) and inst.block == (8, 8, 4)
            assert [inst.arg_as(k, np.int32) for k in (2, 3, 4)] == [N, N, N]
            assert np.array_equal(inst.prologue.global_named("c_weights").array(np.float32),
                                  weights)
            assert inst.prologue.global_named("g_scale").array(np.float32)[0] == 0.5
            src = buffer(inst.prologue, pointer(inst, 0), dtype, N ** 3).reshape(N, N, N)
            out = buffer(inst.epilogue, pointer(inst, 1), dtype, N ** 3).reshape(N, N, N)
            assert np.array_equal(out, stencil(src.astype(np.float64), weights, 0.5).astype(dtype))
            if inst.launch_index == 1:  # the generated input
                assert np.array_equal(src.ravel(), ((np.arange(N ** 3) * 7) % 16).astype(dtype))
    assert kinds == {np.float32: 2, np.float64: 2}  # ping-pong: two distinct launches each


def test_tree_search(example_binaries, tmp_path):
    db = recorded_db(example_binaries, "tree_search", tmp_path)
    (inst,) = db.instances
    m, q = 1000, 4096
    node = np.dtype([("key", "<i4"), ("value", "<f4"), ("left", "<u8"), ("right", "<u8")])
    root, pq, pr, pd = (pointer(inst, k) for k in range(4))
    (nodes_region,) = [r for r in inst.prologue.allocations if r.size == m * node.itemsize]
    nodes = nodes_region.read().view(node)
    assert np.array_equal(nodes["key"], 3 * np.arange(m) + 1)
    assert np.array_equal(nodes["value"], (0.5 * np.arange(m)).astype(np.float32))
    queries = buffer(inst.prologue, pq, np.int32, q)
    assert np.array_equal(queries, (np.arange(q) * 7) % (3 * m + 3))
    # Walk the recorded pointers on the host.
    results, depths = np.empty(q, np.float32), np.empty(q, np.int32)
    for i, key in enumerate(queries):
        address, depth, found = root, 0, -1.0
        while address:
            at = (address - nodes_region.address) // node.itemsize
            assert nodes_region.address + at * node.itemsize == address
            depth += 1
            if key == nodes["key"][at]:
                found = nodes["value"][at]
                break
            address = int(nodes["left"][at] if key < nodes["key"][at] else nodes["right"][at])
        results[i], depths[i] = found, depth
    assert np.array_equal(buffer(inst.epilogue, pr, np.float32, q), results)
    assert np.array_equal(buffer(inst.epilogue, pd, np.int32, q), depths)


def test_atomic_sum(example_binaries, tmp_path):
    db = recorded_db(example_binaries, "atomic_sum", tmp_path)
    (inst,) = db.instances
    n = 100000
    x = (np.arange(n) % 8).astype(np.float32)
    bins = (np.arange(n) * 13) % 64
    px, pb, ps, pt = (pointer(inst, k) for k in range(4))
    assert np.array_equal(buffer(inst.prologue, px, np.float32, n), x)
    assert np.array_equal(buffer(inst.prologue, pb, np.int32, n), bins)
    assert not buffer(inst.prologue, ps, np.float32, 64).any()
    sums = np.bincount(bins, weights=x, minlength=64).astype(np.float32)
    assert np.array_equal(buffer(inst.epilogue, ps, np.float32, 64), sums)
    assert buffer(inst.epilogue, pt, np.float64, 1)[0] == x.sum(dtype=np.float64)


def test_big_shared(example_binaries, tmp_path):
    db = recorded_db(example_binaries, "big_shared", tmp_path)
    (inst,) = db.instances
    tile, tiles = 96 * 1024 // 4, 8
    assert inst.shared_mem_bytes == 96 * 1024 and inst.block == (512, 1, 1)
    src = buffer(inst.prologue, pointer(inst, 0), np.float32, tile * tiles)
    assert np.array_equal(src, (np.arange(tile * tiles) % 1000).astype(np.float32))
    out = buffer(inst.epilogue, pointer(inst, 1), np.float32, tile * tiles)
    assert np.array_equal(out, src.reshape(tiles, tile)[:, ::-1].ravel())


def test_multi_tu(example_binaries, tmp_path):
    db = recorded_db(example_binaries, "multi_tu", tmp_path)
    n = 10000
    i = np.arange(n)
    by = {k.demangled.split("(")[0]: k.instances for k in db.kernels}
    assert set(by) == {"init", "integrate", "void affine<float>", "lookup"}
    (init,) = by["init"]
    pos, vel, idx = (pointer(init, k) for k in range(3))
    assert np.array_equal(buffer(init.epilogue, pos, np.float32, n), (i % 100).astype(np.float32))
    assert np.array_equal(buffer(init.epilogue, vel, np.float32, n), (i % 7 - 3).astype(np.float32))
    assert np.array_equal(buffer(init.epilogue, idx, np.int32, n), i % 5)
    (step,) = by["integrate"]  # three launches, one identity
    p0 = buffer(step.prologue, pointer(step, 0), np.float32, n)
    v = buffer(step.prologue, pointer(step, 1), np.float32, n)
    assert step.arg_as(2, np.float32) == 0.5
    assert np.array_equal(buffer(step.epilogue, pointer(step, 0), np.float32, n), p0 + v * 0.5)
    steps = step.prologue.global_named("g_steps")
    assert steps.array(np.int32)[0] + 1 == step.epilogue.global_named("g_steps").array(np.int32)[0]
    (affine,) = by["void affine<float>"]
    x = buffer(affine.prologue, pointer(affine, 1), np.float32, n)
    assert np.array_equal(x, (i % 100 + 3 * 0.5 * (i % 7 - 3)).astype(np.float32))
    assert np.array_equal(buffer(affine.epilogue, pointer(affine, 0), np.float32, n), 2 * x + 1)
    (lookup,) = by["lookup"]
    table = lookup.prologue.global_named("c_table").array(np.float32)
    assert np.array_equal(table, [0.25, 0.5, 1.0, 2.0])
    before = buffer(lookup.prologue, pointer(lookup, 0), np.float32, n)
    after = buffer(lookup.epilogue, pointer(lookup, 0), np.float32, n)
    assert np.array_equal(after, before * table[(i % 5) & 3])


def test_other_launch_and_allocation_apis(example_binaries, tmp_path):
    """Cooperative and cluster launches, stream-ordered and pitched allocations."""
    native, recorded = record(example_binaries, "launch_apis", tmp_path / "db", args=[])
    assert recorded.stdout == native.stdout and "pitch_ok=1" in native.stdout
    db = RecordDB(tmp_path / "db")
    check_common(db)
    scale = next(k for k in db.kernels if k.demangled.startswith("scale("))
    coop, clustered = sorted(scale.instances, key=lambda i: i.launch_index)
    assert (coop.api, coop.cooperative, coop.cluster) == ("cudaLaunchCooperativeKernel", True, None)
    assert (clustered.api, clustered.cluster) == ("cudaLaunchKernelExC", (2, 1, 1))
    n = 4096
    x0 = (np.arange(n) % 100).astype(np.float32)
    for inst, factor, before in ((coop, 2.0, x0), (clustered, 0.5, 2 * x0)):
        assert inst.arg_as(1, np.float32) == factor
        px = pointer(inst, 0)
        assert np.array_equal(buffer(inst.prologue, px, np.float32, n), before)
        assert np.array_equal(buffer(inst.epilogue, px, np.float32, n), before * factor)
    (fill,) = next(k for k in db.kernels if k.demangled.startswith("fill_rows(")).instances
    pitch = int(fill.arg_as(1, np.uint64))
    assert pitch % 512 == 0 and pointer(fill, 0) % 256 == 0
    rows = buffer(fill.epilogue, pointer(fill, 0), np.uint8, pitch * 8).view(np.float32)
    rows = rows.reshape(8, pitch // 4)[:, :100]
    assert np.array_equal(rows, np.add.outer(np.arange(8) * 1000, np.arange(100)).astype(np.float32))


def test_selection_and_listing(example_binaries, tmp_path):
    import re

    db_path = tmp_path / "db"
    _, recorded = record(example_binaries, "cg", db_path, "--kernels", "^axpy|sum_partials",
                         "--skip", "2", "--max-instances", "1", "-v")
    # -v: where the fixed start went (the context, the database, the writer's threads),
    # and what the launches not recorded cost.
    start = re.search(r"the recorder's start took ([\d.]+) ms \(([\d.]+) ms reserving the VA "
                      r"window\); (\d+) launch\(es\) passed on unrecorded, ([\d.]+) us each",
                      recorded.stderr)
    assert start, recorded.stderr
    assert float(start[1]) >= float(start[2]) >= 0 and float(start[1]) > 0 and int(start[3]) > 2
    parts = re.search(r"of the start, ([\d.]+) ms the CUDA context, ([\d.]+) ms opening the "
                      r"database; the writer starts up to (\d+) compressing threads as instances "
                      r"need them", recorded.stderr)
    assert parts, recorded.stderr
    assert float(parts[1]) + float(parts[2]) <= float(start[1]) + 0.2 and int(parts[3]) >= 1
    # The writer's threads as it started them: of each kind one at least, and at most 4
    # fetching and, once the exit adds one per processor, twice the compressing ones.
    writer = re.search(r"the writer: [\d.]+ s copying staged bytes to the host \((\d+) threads\), "
                       r"[\d.]+ s compressing and writing \((\d+) threads\), summed over the "
                       r"threads it started", recorded.stderr)
    assert writer and 1 <= int(writer[1]) <= 4 and 1 <= int(writer[2]) <= 2 * int(parts[3]), \
        recorded.stderr
    assert "ms of CPU in mneme record" in recorded.stderr
    db = RecordDB(db_path)
    names = sorted(k.demangled.split("(")[0] for k in db.kernels)
    assert names == ["axpy", "sum_partials"]
    for kernel in db.kernels:
        (inst,) = kernel.instances
        assert inst.launch_index == 3  # two warm-up launches skipped
    listing = run(["mneme", "ls", str(db_path), "--verify"]).stdout
    assert "2 kernel(s), 2 instance(s)" in listing and "carries IR" in listing
    inst = db.instances[0]
    shown = run(["mneme", "show", str(db_path), inst.name, "--json"]).stdout
    assert f'"instance": "{inst.name}"' in shown


def test_not_built_with_mneme(example_binaries, tmp_path):
    """nvcc with the shared runtime: recorded, but no IR to replay from."""
    exe = tmp_path / "vector_add_nvcc"
    src = Path(__file__).resolve().parents[2] / "examples" / "vector_add" / "vector_add.cu"
    run(["nvcc", "-O2", "-arch=sm_90", "-cudart", "shared", str(src), "-o", str(exe)])
    native = run([str(exe), "100000"])
    recorded = run(["mneme", "record", "-rdb", str(tmp_path / "db"), "--", str(exe), "100000"])
    assert recorded.stdout == native.stdout
    db = RecordDB(tmp_path / "db")
    (kernel,) = db.kernels
    assert not kernel.has_ir and kernel.image() is not None
    assert kernel.provenance == "ptx"  # -arch=sm_90 embeds compute_90 PTX too
    assert "carries PTX (compute_90), no IR" in run(["mneme", "ls", str(tmp_path / "db")]).stdout


@pytest.mark.parametrize("name, flags, message, reason", [
    ("managed", [], "managed memory is not recorded", "managed"),
    ("vector_add", ["--vass", "4096T"], "cannot reserve the VA window", "no VA window"),
    ("vector_add", ["--vass", "8M"], "does not fit in the VA window", "outside the VA window"),
])
def test_what_cannot_be_replayed_is_said(example_binaries, tmp_path, name, flags, message,
                                         reason):
    """Managed memory, no window, a window too small: one message, the same output."""
    native, recorded = record(example_binaries, name, tmp_path / "db", *flags,
                              args=[] if name == "managed" else None)
    assert recorded.stdout == native.stdout
    assert message in recorded.stderr
    (inst,) = RecordDB(tmp_path / "db").instances
    assert not inst.replayable and reason in inst.reasons[0]


def test_sigkill_leaves_a_readable_database(example_binaries, tmp_path):
    """kill -9 at random points while instances are being recorded: what the
    index lists is always complete and verifies, whatever was in flight."""
    rng = random.Random(1234)
    cmd = [str(example_binaries / "cg"), "64", "400"]
    flags = ["--max-instances", "40"]
    run(["mneme", "record", "-rdb", str(tmp_path / "full"), *flags, "--", *cmd])
    total = len(RecordDB(tmp_path / "full").instances)
    outcomes = []
    for trial in range(10):
        db_path = tmp_path / f"db{trial}"
        target = rng.randrange(1, total)  # kill once this many instances are committed
        proc = subprocess.Popen(["mneme", "record", "-rdb", str(db_path), *flags, "--", *cmd],
                                env=tool_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        index = db_path / "index"
        while proc.poll() is None and (not index.exists()
                                       or len(list(index.glob("*.json"))) < target):
            time.sleep(0.0005)
        time.sleep(rng.uniform(0, 0.003))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        run(["mneme", "ls", str(db_path), "--verify", "--json"])  # exit 0: readable
        db = RecordDB(db_path)
        for inst in db.instances:
            inst.verify()
        outcomes.append((target, len(db.instances), len(db.incomplete)))
    print("(target, complete, in flight) after each kill, of", total, ":", outcomes)
    assert all(complete >= target for target, complete, _ in outcomes)
    assert sum(complete < total for _, complete, _ in outcomes) >= 8, outcomes


def test_sigterm_to_record_stops_the_application_and_keeps_the_database(example_binaries,
                                                                       tmp_path):
    """SIGTERM to `mneme record` reaches the application (which dies of it),
    mneme exits with its status, nothing is left running and every instance
    the index lists verifies."""
    db_path = tmp_path / "db"
    proc = subprocess.Popen(["mneme", "record", "-rdb", str(db_path), "--max-instances", "40",
                             "--", str(example_binaries / "cg"), "64", "400"],
                            env=tool_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    index = db_path / "index"
    while proc.poll() is None and (not index.exists() or len(list(index.glob("*.json"))) < 3):
        time.sleep(0.001)
    proc.send_signal(signal.SIGTERM)  # to mneme alone, as a batch system would
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err
    leftover = subprocess.run(["pgrep", "-f", f"{example_binaries / 'cg'} 64 400"],
                              capture_output=True, text=True).stdout
    assert leftover == "", leftover
    db = RecordDB(db_path)
    assert len(db.instances) >= 3
    for inst in db.instances:
        inst.verify()


def test_a_damaged_real_database_never_ends_in_a_traceback(example_binaries, tmp_path):
    """The fuzz of tests/record/test_database_fuzz.py, over a database the recorder wrote."""
    from test_database_fuzz import assert_no_traceback, mutations

    run(["mneme", "record", "-rdb", str(tmp_path / "real"), "--",
         str(example_binaries / "vector_add"), "100000"])
    assert_no_traceback(tmp_path / "real", tmp_path / "copies",
                        mutations(tmp_path / "real", chunks=3))
