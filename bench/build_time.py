"""Build-time cost of mneme-cc: mneme-cxx vs plain clang++ on one TU.

Compiles bench/many_kernels.cu (32 kernels) with `-O3 -c` both ways,
alternating the two so drift hits both alike, and prints the medians and
their ratio.  Plain clang gets the very flags mneme-cxx adds except the
plugin, so the ratio is the whole price: Python start-up, the clang version
check, IR capture and embedding.

    python bench/build_time.py [--repeats 7] [--opt=-O3]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mneme_cc.drivers import driver, toolchain

SOURCE = Path(__file__).resolve().parent / "many_kernels.cu"


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--opt", default="-O3")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        user_args = [args.opt, "-c", str(SOURCE), "-o", f"{tmp}/k.o"]
        mneme = [str(Path(sys.executable).parent / "mneme-cxx"), *user_args]
        plain = [a for a in driver.clang_command("c++", user_args)
                 if not a.startswith("-fpass-plugin=")]
        timed(mneme), timed(plain)  # warm the page cache
        samples: dict[str, list[float]] = {"mneme-cxx": [], "clang++": []}
        for _ in range(args.repeats):
            samples["mneme-cxx"].append(timed(mneme))
            samples["clang++"].append(timed(plain))

    medians = {k: statistics.median(v) for k, v in samples.items()}
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"clang {toolchain.clang_major(toolchain.select_clang())}, {args.opt}, "
          f"{args.repeats} runs each")
    for name, values in samples.items():
        print(f"  {name:10s} median {medians[name]:.3f} s  "
              f"(min {min(values):.3f}, max {max(values):.3f})")
    print(f"build-time ratio mneme-cxx / clang++: {medians['mneme-cxx'] / medians['clang++']:.3f}")


if __name__ == "__main__":
    main()
