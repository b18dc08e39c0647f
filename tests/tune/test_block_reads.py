"""A block shape is probed only where the kernel reads the block's or the
grid's size on the sides it moves (synthetic record databases holding a real
module or PTX, no GPU)."""

from __future__ import annotations

from types import SimpleNamespace

import llvmlite.binding as llvm
import numpy as np
import pytest
from synthetic_db import ADD, PTX, cubin_image, make_database
from tune_doubles import H100

from mneme_cc.errors import RecordDBError
from mneme_cc.record.db import RecordDB
from mneme_cc.tune.auto import auto_space
from mneme_cc.tune.block_reads import sides_read


def module_reading(*registers: str) -> bytes:
    """An NVPTX module defining the synthetic database's kernel, reading
    threadIdx.x and the given special registers (e.g. "ntid.x")."""
    reads = "".join(f"  %r{i} = call i32 @llvm.nvvm.read.ptx.sreg.{r}()\n"
                    for i, r in enumerate(registers))
    declares = "".join(f"declare i32 @llvm.nvvm.read.ptx.sreg.{r}()\n"
                       for r in {"tid.x", *registers})
    text = (f'target triple = "nvptx64-nvidia-cuda"\n'
            f"define void @{ADD}(ptr %a, ptr %b, ptr %c, i32 %n) {{\n"
            f"  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n{reads}  ret void\n}}\n"
            f"{declares}")
    return llvm.parse_assembly(text).as_bitcode()


def ptx_reading(line: str) -> bytes:
    return PTX.replace(b"\tret;", f"\t.reg .b32 %r<2>;\n\t{line}\n\tret;".encode())


def instance(tmp_path, block=(256, 1, 1), grid=(4, 1, 1), **kinds):
    a = np.arange(1024, dtype=np.float32)
    make_database(tmp_path / "db", a, a, a + a, grid=grid, block=block, **kinds)
    return RecordDB(tmp_path / "db").instances[0]


def probes(space) -> list:
    tried = []
    space.calibrate(lambda c: tried.append(c) or SimpleNamespace(verified=True))
    return tried


def ir_kernel(*lines: str, helpers: str = "") -> SimpleNamespace:
    """A kernel whose module text defines it with these lines (and helpers)."""
    body = "".join(f"  {line}\n" for line in lines)
    return SimpleNamespace(has_ir=True, name="k",
                           module=f"define void @k() {{\n{body}  ret void\n}}\n{helpers}")


HELPER_READING_Y = "define i32 @h() {\n  %y = call i32 @llvm.nvvm.read.ptx.sreg.ntid.y()\n}\n"


@pytest.mark.parametrize("lines, sides", [
    (["%x = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()"], {"x"}),
    (["%y = tail call noundef range(i32 1, 1025) i32 @llvm.nvvm.read.ptx.sreg.ntid.y()",
      "%z = call i32 @llvm.nvvm.read.ptx.sreg.tid.z()"], {"y"}),
    (['%z = call i32 asm "mov.u32 $0, %ntid.z;", "=r"()'], {"z"}),
    (['%v = call <4 x i32> asm "mov.v4.u32 $0, %ntid;", "=r"()'], {"x", "y", "z"}),
    # i = threadIdx.x * gridDim.x + blockIdx.x covers the same threads under any split.
    (["%t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
      "%g = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()"], {"x"}),
    (['%g = call i32 asm "mov.u32 $0, %nctaid.y;", "=r"()'], {"y"}),
    (["%t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
      "%b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.y()",
      "%e = call float @__nv_expf(float 1.0)"], set()),
])
def test_the_sides_read_are_found_in_the_kernel_s_code(lines, sides):
    assert sides_read(ir_kernel(*lines)) == sides


def test_what_the_kernel_calls_counts_and_the_module_s_other_functions_do_not():
    calls = ir_kernel("%r = call i32 @h()", helpers=HELPER_READING_Y)
    assert sides_read(calls) == {"y"}
    assert sides_read(ir_kernel("%t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()",
                                helpers=HELPER_READING_Y)) == set()


@pytest.mark.parametrize("line", ["call void %fp()", "%r = call i32 @elsewhere()",
                                  "%r = call i32 @vprintf_helper()"])
def test_a_call_whose_code_the_module_lacks_may_read_anything(line):
    assert sides_read(ir_kernel(line, helpers="declare i32 @elsewhere()\n")) is None


def test_a_value_named_call_is_no_call():
    assert sides_read(ir_kernel("%call = add i32 0, 1", "store i32 %call, ptr %p")) == set()


def test_a_callee_with_a_quoted_name_is_followed():
    helper = ('define i32 @"my helper"() {\n'
              "  %z = call i32 @llvm.nvvm.read.ptx.sreg.ntid.z()\n}\n")
    assert sides_read(ir_kernel('%r = call i32 @"my helper"()', helpers=helper)) == {"z"}


@pytest.mark.parametrize("line", ["%c = call i32 @llvm.nvvm.read.ptx.sreg.nclusterid.x()",
                                  '%c = call i32 asm "mov.u32 $0, %nclusterid.x;", "=r"()',
                                  '%c = call i32 asm "mov.u32 $0, %cluster_nctaid.x;", "=r"()'])
def test_the_grid_counted_in_clusters_is_a_read_of_its_size(line):
    assert sides_read(ir_kernel(line)) == {"x"}


def test_what_cannot_be_read_may_read_every_side():
    class Unreadable:
        has_ir = True

        @property
        def module(self):
            raise RecordDBError("LLVM cannot read it")

    assert sides_read(Unreadable()) is None
    assert sides_read(SimpleNamespace(has_ir=False, provenance="cubin")) is None


def test_a_kernel_that_never_reads_its_block_or_grid_size_is_not_probed(tmp_path):
    space = auto_space(instance(tmp_path, bitcode=module_reading("ctaid.x")), H100)
    assert probes(space) == [] and "block" not in {d.name for d in space.dimensions()}


@pytest.mark.parametrize("size", ["ntid.x", "nctaid.x"])
def test_a_kernel_that_reads_its_block_or_grid_size_is_probed_and_searched(tmp_path, size):
    space = auto_space(instance(tmp_path, bitcode=module_reading(size, "ctaid.x")), H100)
    (probe,) = probes(space)
    assert probe.block == (128, 1, 1) and probe.grid == (8, 1, 1)
    assert "block" in {d.name for d in space.dimensions()}


@pytest.mark.parametrize("line, probed", [("mov.u32 %r1, %ntid.x;", True),
                                          ("mov.u32 %r1, %tid.x;", False)])
def test_a_ptx_kernel_is_probed_as_its_ptx_reads(tmp_path, line, probed):
    space = auto_space(instance(tmp_path, image=ptx_reading(line)), H100)
    assert bool(probes(space)) is probed


def test_a_multi_dimensional_kernel_reading_only_x_is_probed_in_x_alone(tmp_path):
    space = auto_space(instance(tmp_path, block=(8, 8, 4), grid=(4, 8, 2),
                                image=ptx_reading("mov.u32 %r1, %ntid.x;")), H100)
    tried = []
    space.calibrate(lambda c: tried.append(c) or SimpleNamespace(verified=False))
    assert [c.block for c in tried] == [(4, 8, 4)]  # every side changed: not tried
    assert "block_shape" not in {d.name for d in space.dimensions()}


def test_a_cubin_kernel_is_probed_as_before(tmp_path):
    space = auto_space(instance(tmp_path, block=(8, 8, 4), grid=(4, 8, 2),
                                image=cubin_image()), H100)
    assert len(probes(space)) == 1


def test_a_kernel_reading_x_and_y_but_not_z_is_probed_and_searched_in_x_and_y(tmp_path):
    from mneme_cc.tune.space import parse_shape

    read = "mov.u32 %r1, %ntid.x;\n\tmov.u32 %r1, %nctaid.y;"
    space = auto_space(instance(tmp_path, block=(8, 8, 4), grid=(4, 8, 2),
                                image=ptx_reading(read)), H100)
    (probe,) = probes(space)  # x and y moved, z as recorded
    assert probe.block[2] == 4 and probe.block[:2] != (8, 8)
    assert probe.block[0] * probe.block[1] == 64
    (dim,) = [d for d in space.dimensions() if d.name == "block_shape"]
    assert {parse_shape(name)[2] for name in dim.choices} == {4}
    assert {parse_shape(name)[:2] for name in dim.choices} > {(8, 8), probe.block[:2]}


def test_a_kernel_reading_every_side_is_not_probed_in_x_and_y_after_every_side_failed(
        tmp_path):
    read = "mov.u32 %r1, %ntid.x;\n\tmov.u32 %r1, %ntid.y;\n\tmov.u32 %r1, %ntid.z;"
    space = auto_space(instance(tmp_path, block=(8, 8, 4), grid=(4, 8, 2),
                                image=ptx_reading(read)), H100)
    tried = []
    space.calibrate(lambda c: tried.append(c) or SimpleNamespace(verified=False))
    assert len(tried) == 2 and tried[1].block == (4, 8, 4)  # every side, then x alone
