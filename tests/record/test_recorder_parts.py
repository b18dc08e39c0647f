"""Parts of the recorder built on the CPU against their real sources: the
staging memory against a fake driver, the writer's fetch threads against
pieces that only wait (the GPU tier runs them with real copies)."""

from __future__ import annotations

from conftest import TESTS, run

from mneme_cc.drivers import toolchain

RUNTIME = TESTS.parent / "runtime"


def build(harness: str, sources: list[str], out, *libraries: str):
    binary = out / harness
    run(["g++", "-std=c++17", "-Wall", "-Werror", f"-I{RUNTIME / 'recorder'}",
         f"-I{RUNTIME / 'include'}", f"-I{toolchain.require_cuda_toolkit() / 'include'}",
         str(TESTS / "samples" / "recorder" / f"{harness}.cpp"),
         *(str(RUNTIME / s) for s in sources), "-o", str(binary), *libraries])
    return binary


def test_staging_blocks_are_reused_freed_and_kept_as_documented(tmp_path):
    harness = build("staging_memory", ["recorder/StagingMemory.cpp"], tmp_path)
    assert run([str(harness)]).stdout.strip() == "ok"


def test_a_few_pieces_take_one_fetch_thread_and_many_take_them_all(tmp_path):
    harness = build("fetch_ranks", ["recorder/DatabaseWriter.cpp", "recorder/Options.cpp",
                                    "src/SnapshotStore.cpp", "src/ContentHash.cpp",
                                    "src/Sha256.cpp"], tmp_path, "-lzstd", "-lpthread")

    def fetch(pieces: int) -> tuple[int, int]:
        """(pieces fetched, threads that fetched them) for one job of `pieces`."""
        out = run([str(harness), str(tmp_path / f"db{pieces}"), str(pieces)]).stdout.split()
        return int(out[0]), int(out[1])

    assert fetch(2) == (2, 1)
    fetched, threads = fetch(12)
    assert fetched == 12 and threads >= 3  # of 4; a thread slow to wake may find too few left


def test_what_is_queued_at_exit_is_stored_raw_and_compact_compresses_it(tmp_path):
    from synthetic_db import chunk_codec

    from mneme_cc.record import compact_database
    from mneme_cc.record.compact import chunk_names

    harness = build("raw_at_exit", ["recorder/DatabaseWriter.cpp", "recorder/Options.cpp",
                                    "src/SnapshotStore.cpp", "src/ContentHash.cpp",
                                    "src/Sha256.cpp"], tmp_path, "-lzstd", "-lpthread")

    def codecs(db) -> list[int]:
        return [chunk_codec(db, n) for n in chunk_names(db)]

    chunks, stored = map(int, run([str(harness), str(tmp_path / "raw"), "raw"]).stdout.split())
    assert chunks == 16 and stored == 16 * ((64 << 10) + 56)  # every chunk, with its header
    assert codecs(tmp_path / "raw") == [0] * 16
    assert run([str(harness), str(tmp_path / "wait"), "wait"]).stdout.split() == ["0", "0"]
    assert codecs(tmp_path / "wait") == [1] * 16
    result = compact_database(tmp_path / "raw")
    assert result.compacted == 16 and codecs(tmp_path / "raw") == [1] * 16
    assert result.bytes_after < result.bytes_before // 100
