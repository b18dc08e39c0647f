"""What a kernel without IR can be tuned on, decided from what it carries
(a synthetic record database holding an nvcc-style image, no GPU)."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic_db import PTX, cubin_image, make_database
from tune_doubles import H100

from mneme_cc.errors import UsageError
from mneme_cc.record.db import RecordDB
from mneme_cc.tune.auto import auto_space
from mneme_cc.tune.presets import load_space


def database(tmp_path, image: bytes) -> RecordDB:
    a = np.arange(1024, dtype=np.float32)
    make_database(tmp_path / "db", a, a, a + a, image=image)
    return RecordDB(tmp_path / "db")


def test_a_kernel_with_ptx_tunes_ptxas_bounds_and_registers(tmp_path):
    db = database(tmp_path, PTX)
    (kernel,) = db.kernels
    assert kernel.provenance == "ptx" and kernel.ptx_image().arch == 90
    assert "carries PTX (compute_90), no IR" in kernel.replay_note
    space = auto_space(db.instances[0], H100)
    names = {d.name for d in space.dimensions()}
    assert names == {"launch_bounds", "min_blocks_per_sm", "max_registers"}
    config = space.derive(space.initial_params())
    assert config.baseline is None and config.pipeline == "default<O3>"
    space.changes_numerics = True  # ptxas's level may change the rounding: only then searched
    assert "ptxas_opt_level" in {d.name for d in space.dimensions()}
    assert {d.name for d in load_space("ptx", db.instances[0], H100).dimensions()} >= \
        {"ptxas_opt_level", "max_registers", "launch_bounds"}
    with pytest.raises(UsageError, match="carries PTX, no IR; use --space auto or one of ptx"):
        load_space("standard", db.instances[0], H100)


def test_a_kernel_with_machine_code_only_tunes_geometry_from_its_image(tmp_path):
    db = database(tmp_path, cubin_image())
    (kernel,) = db.kernels
    assert kernel.provenance == "cubin" and kernel.ptx_image() is None
    space = auto_space(db.instances[0], H100)
    assert space.dimensions() == []  # geometry only once calibrate() finds it verifies
    space.launch_agnostic = True
    assert [d.name for d in space.dimensions()] == ["block"]
    config = space.derive({"block": 128})
    assert config.baseline == "original" and config.block == (128, 1, 1)
    assert config.grid == (8, 1, 1)  # the recorded 4 x 256 threads
    with pytest.raises(UsageError, match="carries a cubin only"):
        load_space("ptx", db.instances[0], H100)


def test_a_ptx_kernel_compiles_from_its_own_ptx_with_bounds(tmp_path):
    from mneme_cc.errors import RecordDBError
    from mneme_cc.replay.compiling.compiler import compile_instance
    from mneme_cc.replay.config import ReplayConfig

    db = database(tmp_path, PTX)
    inst = db.instances[0]
    config = ReplayConfig(launch_bounds=True, min_blocks_per_sm=2, max_registers=32)
    compiled = compile_instance(inst, config, "sm_90", tmp_path / "cache")
    assert compiled.cubin[:4] == b"\x7fELF" and ".maxntid 256, 1, 1" in compiled.ptx
    assert ".minnctapersm 2" in compiled.ptx
    again = compile_instance(inst, config, "sm_90", tmp_path / "cache")
    assert again.cache_hit and again.cubin == compiled.cubin
    with pytest.raises(UsageError, match="cannot apply"):
        compile_instance(inst, ReplayConfig(specialize_dims=True), "sm_90", tmp_path / "cache")
    with pytest.raises(RecordDBError, match="carries no IR"):
        compile_instance(inst, ReplayConfig(baseline="ir"), "sm_90", tmp_path / "cache")


def test_a_multi_dimensional_launch_searches_block_shapes_covering_its_threads(tmp_path):
    from types import SimpleNamespace

    from mneme_cc.tune.space import parse_shape

    a = np.arange(1024, dtype=np.float32)
    make_database(tmp_path / "db", a, a, a + a, image=cubin_image(), grid=(4, 8, 2),
                  block=(8, 8, 4))
    space = auto_space(RecordDB(tmp_path / "db").instances[0], H100)
    threads = (32, 64, 8)
    assert space.dimensions() == []
    tried = []
    space.calibrate(lambda c: tried.append(c) or SimpleNamespace(verified=False))
    assert space.dimensions() == []
    # Every side changed first, then x alone (the nearest half of it).
    assert [c.block for c in tried][1] == (4, 8, 4)
    tried = []
    space.calibrate(lambda c: tried.append(c) or SimpleNamespace(verified=True))
    # One replay, as many threads per block in another shape, every side changed.
    (probe,) = tried
    assert probe.block[0] * probe.block[1] * probe.block[2] == 256
    assert all(p != r for p, r in zip(probe.block, (8, 8, 4), strict=True))
    assert tuple(g * b for g, b in zip(probe.grid, probe.block, strict=True)) == threads
    (dim,) = space.dimensions()
    assert dim.name == "block_shape" and "32x4x2" in dim.choices
    assert dim.choices[:2] == ("8x8x4", "32x32x1")  # the recorded shape, then the widest
    for name in dim.choices:  # whole warps, within CUDA's limits, covering the threads
        x, y, z = parse_shape(name)
        assert (x * y * z) % 32 == 0 and x * y * z <= 1024 and z <= 64
        assert all(t % s == 0 for t, s in zip(threads, (x, y, z), strict=True))
    first = space.initial_params()
    assert first == {"block_shape": "8x8x4"}
    assert (space.derive(first).block, space.derive(first).grid) == ((8, 8, 4), (4, 8, 2))
    config = space.derive({"block_shape": "32x4x2"})
    assert (config.block, config.grid) == ((32, 4, 2), (1, 16, 4))


def multi_dimensional(tmp_path, image=None):
    a = np.arange(1024, dtype=np.float32)
    make_database(tmp_path / "db", a, a, a + a, image=cubin_image() if image is None else image,
                  grid=(4, 8, 2), block=(8, 8, 4))
    return RecordDB(tmp_path / "db").instances[0]


def test_a_kernel_free_in_x_alone_searches_the_x_side_only(tmp_path):
    from types import SimpleNamespace

    from mneme_cc.tune.space import parse_shape

    space = auto_space(multi_dimensional(tmp_path), H100)
    # As a kernel indexing rows by blockIdx.y would: y and z must stay.
    space.calibrate(lambda c: SimpleNamespace(verified=c.block[1:] == (8, 4)))
    (dim,) = space.dimensions()
    shapes = [parse_shape(name) for name in dim.choices]
    assert shapes[0] == (8, 8, 4) and {s[1:] for s in shapes} == {(8, 4)}
    assert sorted(s[0] for s in shapes) == [1, 2, 4, 8, 16, 32]


def test_the_geometry_preset_searches_a_multi_dimensional_shape_once_a_probe_verifies(
        tmp_path):
    from types import SimpleNamespace

    space = load_space("geometry", multi_dimensional(tmp_path), H100)
    assert space.dimensions() == []
    space.calibrate(lambda c: SimpleNamespace(verified=False))
    assert space.dimensions() == []
    tried = []
    space.calibrate(lambda c: tried.append(c) or SimpleNamespace(verified=True))
    assert len(tried) == 1 and tried[0].baseline == "original"  # run from the image
    assert [d.name for d in space.dimensions()] == ["block_shape"]
    with pytest.raises(UsageError, match="block shape 3x8x4 does not divide the recorded "
                                         "threads 32x64x8"):
        space.derive({"block_shape": "3x8x4"})
