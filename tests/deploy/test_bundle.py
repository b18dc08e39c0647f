"""Bundles: the verified winners as deployable units (manifest, cubins, matching)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import run

from mneme_cc.deploy import load_bundle
from mneme_cc.errors import UsageError
from mneme_cc.record import RecordDB
from mneme_cc.replay.config import ReplayConfig

EXAMPLES = Path(__file__).parents[2] / "examples"


def make_tuned(tmp_path: Path, config: ReplayConfig | None = None):
    """A database of vector_add's real IR (built here with mneme-cxx) with one study's
    best.json (its winner `config`); returns the database and its instance."""
    import numpy as np
    from synthetic_db import make_database

    from mneme_cc.drivers import read_embedded_modules

    obj = tmp_path / "vector_add.o"
    run(["mneme-cxx", "-O3", "-c", str(EXAMPLES / "vector_add" / "vector_add.cu"), "-o",
         str(obj)])
    (module,) = read_embedded_modules(obj)
    a = np.arange(1024, dtype=np.float32)
    db = tmp_path / "db"
    make_database(db, a, a, a + a, bitcode=module.bitcode,
                  kernel=("_Z10vector_addPKfS0_Pfi",
                          "vector_add(float const*, float const*, float*, int)"))
    (inst,) = RecordDB(db).instances
    config = config or ReplayConfig(pipeline="default<O2>", launch_bounds=True)
    best = {"kernel": inst.kernel_name, "demangled": inst.demangled, "instance": inst.name,
            "study": "s", "launch": {"grid": list(inst.grid), "block": list(inst.block),
                                     "shared_mem_bytes": inst.shared_mem_bytes},
            "config": config.to_dict(),
            "median_ms": 0.8, "samples_ms": [0.8], "baseline_ms": 1.0, "speedup": 1.25,
            "measured_speedup": 1.25, "beats_application": True, "registers": 16,
            "device": "NVIDIA H100", "arch": "sm_90"}
    (db / "tune" / "s").mkdir(parents=True)
    (db / "tune" / "s" / "best.json").write_text(json.dumps(best))
    return db, inst


@pytest.fixture
def tuned(tmp_path):
    return make_tuned(tmp_path)


def test_a_bundle_round_trips_and_matches_by_kernel_arch_ir_and_shape(tuned, tmp_path):
    db, inst = tuned
    out = run(["mneme", "export", "-rdb", str(db), "--bundle", str(tmp_path / "b")])
    assert json.loads(out.stdout)[inst.kernel_name]["bundle"]
    bundle = load_bundle(tmp_path / "b")
    (entry,) = bundle.entries
    assert bundle.cubin(entry)[:4] == b"\x7fELF" and entry.arch == "sm_90"
    ir = hashlib.sha256(RecordDB(db).kernel(inst.static_hash).bitcode()).hexdigest()
    assert entry.ir_sha256 == ir and entry.config["launch_bounds"] is True
    assert entry.serve == entry.launch and entry.speedup == 1.25
    key = (inst.kernel_name, "sm_90", ir, inst.grid, inst.block, inst.shared_mem_bytes)
    assert bundle.match(*key)[0] == entry
    assert bundle.match("_Z5otherv", *key[1:]) == (None, "not tuned")
    assert "another GPU" in bundle.match(key[0], "sm_80", *key[2:])[1]
    assert "IR changed" in bundle.match(key[0], key[1], "0" * 64, *key[3:])[1]
    other = (key[0], key[1], ir, (inst.grid[0] * 2, 1, 1), inst.block, inst.shared_mem_bytes)
    assert "--match nearest" in bundle.match(*other)[1]
    assert bundle.match(*other, nearest=True)[0] == entry


def test_damaged_bundles_are_one_line_errors_naming_the_file(tuned, tmp_path):
    db, _ = tuned
    run(["mneme", "export", "-rdb", str(db), "--bundle", str(tmp_path / "b")])
    bundle = load_bundle(tmp_path / "b")
    (entry,) = bundle.entries
    cubin = tmp_path / "b" / entry.cubin
    cubin.write_bytes(b"not a cubin")
    with pytest.raises(UsageError, match=f"{cubin}: does not match its digest"):
        bundle.cubin(entry)
    cubin.unlink()
    with pytest.raises(UsageError, match=f"{cubin}: cannot be read"):
        bundle.cubin(entry)
    manifest = tmp_path / "b" / "manifest.json"
    raw = json.loads(manifest.read_text())
    for damage, message in (
            ({"version": 9}, "not a mneme-bundle version 1"),
            ({"kernels": {}}, "'kernels' is not a list"),
            ({"kernels": [dict(raw["kernels"][0], cubin="../x.cubin")]}, "not a file of the"),
            ({"kernels": [dict(raw["kernels"][0], launch={"grid": [0, 1, 1]})]},
             "launch/serve"),
            ({"kernels": [{"kernel": "k"}]}, "an entry is malformed")):
        manifest.write_text(json.dumps({**raw, **damage}))
        with pytest.raises(UsageError, match=message):
            load_bundle(tmp_path / "b")
    manifest.write_text("{")
    with pytest.raises(UsageError, match="unreadable"):
        load_bundle(tmp_path / "b")
    with pytest.raises(UsageError, match="not a bundle"):
        load_bundle(tmp_path)


def test_a_kernel_that_never_beat_the_application_is_not_bundled(tuned, tmp_path):
    db, inst = tuned
    best = db / "tune" / "s" / "best.json"
    best.write_text(json.dumps(dict(json.loads(best.read_text()), beats_application=False,
                                    measured_speedup=0.9)))
    out = run(["mneme", "export", "-rdb", str(db), "--bundle", str(tmp_path / "b")])
    assert "no configuration beat the application" in out.stderr
    assert not (tmp_path / "b").exists()


def test_the_proteus_export_says_which_arguments_to_annotate(tuned, tmp_path):
    db, inst = tuned
    best = db / "tune" / "s" / "best.json"
    config = ReplayConfig(pipeline="default<O2>", specialize_args=(3,)).to_dict()
    best.write_text(json.dumps(dict(json.loads(best.read_text()), config=config)))
    out = run(["mneme", "export", "-rdb", str(db), "--proteus", str(tmp_path / "p.json")])
    hint = json.loads(out.stdout)[inst.kernel_name]["proteus_annotation"]
    assert hint["annotation"] == '__attribute__((annotate("jit", 4)))'
    assert hint["where"].endswith("vector_add.cu")
    assert 'annotate("jit", 4)' in out.stderr
    assert json.loads((tmp_path / "p.json").read_text())[inst.kernel_name]["SpecializeArgs"]


def test_a_kernel_without_ir_is_bundled_from_its_image(tmp_path):
    """PTX tuned with launch bounds: the cubin assembled from the recorded PTX,
    matched by the image's digest; machine code only: the image itself, in
    the tuned geometry."""
    import numpy as np
    from synthetic_db import PTX, cubin_image, make_database

    from mneme_cc.deploy.bundle import write_bundle

    for name, image, config in (
            ("ptx", PTX, ReplayConfig(launch_bounds=True, max_registers=32)),
            ("cubin", cubin_image(), ReplayConfig(baseline="original", block=(128, 1, 1),
                                                  grid=(8, 1, 1)))):
        a = np.arange(1024, dtype=np.float32)
        make_database(tmp_path / name, a, a, a + a, image=image)
        (inst,) = RecordDB(tmp_path / name).instances
        record = {"launch": {"grid": list(inst.grid), "block": list(inst.block),
                             "shared_mem_bytes": 0}, "median_ms": 0.8, "baseline_ms": 1.0,
                  "speedup": 1.25, "device": "NVIDIA H100"}
        (entry,) = write_bundle(tmp_path / f"b-{name}", [(record, config, inst)],
                                lambda _: "sm_90")
        digest = hashlib.sha256(image).hexdigest()
        assert entry.image_sha256 == digest and entry.ir_sha256 == ""
        bundle = load_bundle(tmp_path / f"b-{name}")
        key = (inst.kernel_name, "sm_90", digest, inst.grid, inst.block, 0)
        assert bundle.match(*key)[0] == bundle.entries[0]
        assert "image changed" in bundle.match(key[0], key[1], "0" * 64, *key[3:])[1]
        cubin = bundle.cubin(bundle.entries[0])
        if name == "ptx":
            assert cubin[:4] == b"\x7fELF" and cubin != image
        else:
            assert cubin == image and entry.serve["block"] == [128, 1, 1]


def test_a_bundle_that_fails_leaves_no_directory_it_made(tuned, tmp_path):
    from mneme_cc.deploy.bundle import write_bundle

    db, inst = tuned
    record = json.loads((db / "tune" / "s" / "best.json").read_text())
    config = ReplayConfig.from_json(record["config"])

    def no_arch(record):
        raise UsageError("no arch for this winner")

    with pytest.raises(UsageError, match="no arch"):
        write_bundle(tmp_path / "new", [(record, config, inst)], no_arch)
    assert not (tmp_path / "new").exists()
    (tmp_path / "kept").mkdir()  # a directory the user made stays
    with pytest.raises(UsageError, match="no arch"):
        write_bundle(tmp_path / "kept", [(record, config, inst)], no_arch)
    assert (tmp_path / "kept").is_dir()
