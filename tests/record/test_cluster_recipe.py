"""docs/cluster.md, where it runs without a cluster: the record recipe on one
node (stage on node-local disk, merge into the shared database), the
Slurm scripts parse, and the file-system operations the record database
relies on (exclusive create, link, rename) behave under concurrent writers
on the file systems this machine has."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import tool_env
from synthetic_db import make_database

from mneme_cc import _native
from mneme_cc.record import RecordDB

CLUSTER = Path(__file__).resolve().parents[2] / "examples" / "cluster"


@pytest.mark.parametrize("script", ["record.sbatch", "tune-array.sbatch"])
def test_the_slurm_scripts_parse(script):
    subprocess.run(["bash", "-n", str(CLUSTER / script)], check=True)


def test_the_record_recipe_stages_on_the_node_and_merges(tmp_path):
    node, shared = tmp_path / "node-local", tmp_path / "shared"
    x = np.arange(1024, dtype=np.float32)
    make_database(node, x, x, x + x)  # what the node's ranks recorded earlier in the job
    env = tool_env(SHARED_DB=str(shared), NODE_DB=str(node), LAUNCH="env",
                   SLURM_JOB_ID="42")
    proc = subprocess.run(["bash", str(CLUSTER / "record.sbatch"), "/bin/true"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "1 instance(s) copied" in proc.stdout
    RecordDB(shared).verify()
    assert [i.name for i in RecordDB(shared).instances] == \
        [i.name for i in RecordDB(node).instances]


def _write(args) -> str:
    """One writer: a chunk every writer writes, and a file only one may create."""
    directory, n = args
    digest, _ = _native.write_chunk(directory, b"the same chunk" * 1000, 1)
    _native.write_file_atomic(os.path.join(directory, "first.json"), f"writer {n}".encode(),
                              True)
    return digest


def test_concurrent_writers_leave_whole_files_and_one_winner(tmp_path):
    """On pytest's temporary directory (ext4 on CI's machine), and on tmpfs
    where the machine mounts one at /dev/shm."""
    import shutil

    places = [tmp_path] + ([Path("/dev/shm")] if os.access("/dev/shm", os.W_OK) else [])
    for base in places:
        directory = base / f"mneme-fs-test-{os.getpid()}"
        _native.init_database(str(directory))
        try:
            with multiprocessing.get_context("fork").Pool(8) as pool:
                digests = set(pool.map(_write, [(str(directory), n) for n in range(64)]))
            assert len(digests) == 1
            assert _native.read_chunk(str(directory), digests.pop()) == b"the same chunk" * 1000
            assert (directory / "first.json").read_text().startswith("writer ")
            assert not [p for p in directory.rglob("*") if ".tmp." in p.name]
        finally:
            shutil.rmtree(directory, ignore_errors=True)
