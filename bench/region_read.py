"""Reading a recorded region: Region.read, which reads a repeated chunk once
and copies it and reads on several threads (READ_THREADS), against reading
every listed chunk on one thread, and against itself on one thread.

A replay reads each allocation the instance restores, and verification
each epilogue region, as a GPU worker of a study starts; buffers of zeros
list one chunk at every index. Builds a database of --mib MiB in 1 MiB
chunks, --distinct of them different (random bytes of 4 bits each, which
zstd halves) and the rest zeros, then times the three reads alternately
(--repeats each, medians), each into a fresh buffer as a replay's read is
(its page faults included).

    python bench/region_read.py --mib 512 --distinct 16
    python bench/region_read.py --mib 512 --distinct 512   # the threads' share
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np

from mneme_cc import _native
from mneme_cc.record import snapshot
from mneme_cc.record.snapshot import ALLOCATION, Region

MIB = 1 << 20


class Store:
    def __init__(self, path: str):
        self.path = path

    def read_chunk(self, digest: str) -> bytes:
        return _native.read_chunk(self.path, digest)


def every_chunk(region: Region) -> np.ndarray:
    """Each listed chunk read in turn, repeats included."""
    out = np.empty(region.size, np.uint8)
    for index, digest in region.chunks.items():
        data = region._db.read_chunk(digest)
        start = index * region.chunk_size
        out[start:start + len(data)] = np.frombuffer(data, np.uint8)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--distinct", type=int, default=16, help="random chunks among them")
    parser.add_argument("--repeats", type=int, default=5)
    a = parser.parse_args()
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory(prefix="mneme-region-") as db:
        _native.init_database(db)
        zeros = _native.write_chunk(db, bytes(MIB), 1)[0]
        chunks = {i: zeros for i in range(a.mib)}
        for i in rng.choice(a.mib, size=min(a.distinct, a.mib), replace=False):
            chunks[int(i)] = _native.write_chunk(
                db, rng.integers(0, 16, MIB, dtype=np.uint8).tobytes(), 1)[0]
        region = Region(ALLOCATION, "", 0, a.mib * MIB, MIB, chunks, Store(db))
        times: dict[str, list[float]] = {"every": [], "one thread": [], "threads": []}
        threads = snapshot.READ_THREADS
        for _ in range(a.repeats):
            t = time.perf_counter()
            every = every_chunk(region)
            times["every"].append(time.perf_counter() - t)
            snapshot.READ_THREADS = 1
            t = time.perf_counter()
            alone = region.read()
            times["one thread"].append(time.perf_counter() - t)
            snapshot.READ_THREADS = threads
            t = time.perf_counter()
            read = region.read()
            times["threads"].append(time.perf_counter() - t)
            assert np.array_equal(read, every) and np.array_equal(alone, every)
            del read, alone, every
    m = {k: statistics.median(v) for k, v in times.items()}
    print(f"{a.mib} MiB, {a.distinct} distinct chunks: every chunk read {m['every']:.3f} s, "
          f"each distinct chunk once {m['one thread']:.3f} s on one thread "
          f"({m['every'] / m['one thread']:.2f}x), {m['threads']:.3f} s on {threads} "
          f"({m['one thread'] / m['threads']:.2f}x more)")

if __name__ == "__main__":
    main()
