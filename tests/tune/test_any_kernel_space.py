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
