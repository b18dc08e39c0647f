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


def test_the_writer_starts_its_threads_as_the_work_needs_them(tmp_path):
    harness = build("fetch_ranks", ["recorder/DatabaseWriter.cpp", "recorder/Options.cpp",
                                    "src/SnapshotStore.cpp", "src/ContentHash.cpp",
                                    "src/Sha256.cpp"], tmp_path, "-lzstd", "-lpthread")

    def fetch(pieces: int, chunks: int = 1) -> list[int]:
        """Pieces fetched, threads that fetched them, fetch and compressing threads started,
        and the threads the process gained, for one job of `pieces`."""
        db = tmp_path / f"db{pieces}.{chunks}"
        return [int(x) for x in run([str(harness), str(db), str(pieces), str(chunks)]).stdout.split()]

    # Nothing recorded, no thread: each costs the process's exit.
    assert fetch(0) == [0, 0, 0, 0, 0]
    # A few pieces and one chunk: a commit, a fetch and a compressing thread.
    assert fetch(2) == [2, 1, 1, 1, 3]
    fetched, threads, fetchers, compressors, started = fetch(12)
    # Every piece once, on up to 4 threads (one slow to wake may find too few left).
    assert fetched == 12 and 3 <= threads <= fetchers == 4
    assert compressors == 1 and started == 1 + fetchers + compressors
    # Sixteen chunks queued at once: as many compressing threads as it may start (4).
    assert fetch(1, 16)[2:] == [1, 4, 6]


def test_small_staged_copies_share_a_fetch_and_a_large_one_is_split(tmp_path):
    harness = build("fetch_pieces", ["recorder/FetchPieces.cpp"], tmp_path)

    def pieces(limit: int, *sizes: int) -> list[str]:
        return run([str(harness), str(limit), *map(str, sizes)]).stdout.splitlines()

    # An instance of a few small copies is one fetch: one thread, one fetcher set up.
    assert pieces(32, 4, 4, 8) == ["0:0:4 1:0:4 2:0:8"]
    # A large copy spreads over the fetch threads; what is left of a piece is filled.
    assert pieces(32, 80, 8, 30) == ["0:0:32", "0:32:32", "0:64:16 1:0:8", "2:0:30"]
    assert pieces(32, 32, 1) == ["0:0:32", "1:0:1"]
    assert pieces(32, 16, 16, 1) == ["0:0:16 1:0:16", "2:0:1"]  # a piece filled exactly
    assert pieces(0, 5) == []
    assert pieces(32) == [] and pieces(32, 0, 5) == ["1:0:5"]
    # Every byte of every copy is fetched once, in order, no piece past the limit.
    sizes = [1, 31, 33, 64, 2, 7, 100, 32]
    spans = [tuple(map(int, s.split(":"))) for line in pieces(32, *sizes) for s in line.split()]
    assert all(sum(int(s.split(":")[2]) for s in line.split()) <= 32
               for line in pieces(32, *sizes))
    for copy, size in enumerate(sizes):
        mine = [(at, n) for c, at, n in spans if c == copy]
        assert [at for at, _ in mine] == list(range(0, size, 32)) and sum(n for _, n in mine) == size


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
