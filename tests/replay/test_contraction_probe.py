"""Why a configuration the rules say keeps the build's numerics may still
round differently under -ffp-contract=fast, and the probe's decisions.

The replay itself (a failure explained, or not, on the GPU) is in
test_gpu_replay.py; here: the compile that shows the mechanism, and the
probe's logic."""

from __future__ import annotations

import re
import struct

import pytest
from conftest import SAMPLES, run

from mneme_cc.drivers import read_embedded_modules
from mneme_cc.replay.compiling.jit import KernelLaunch, compile_ptx
from mneme_cc.replay.compiling.numerics import Codegen, numerics_changes
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.judging import contraction_probe as probe

PAIR = "_Z4pairPKfS0_S0_PfS1_ii"


def fused(ptx: str) -> tuple[str, ...]:
    """The operands of the kernel's one fma, the product it fused first."""
    (operands,) = re.findall(r"fma\.rn\.f32\s+%r\d+, (%r\d+), (%r\d+), (%r\d+);", ptx)
    return operands


def loaded(ptx: str) -> list[str]:
    """The registers x[i], y[i], z[i] are loaded into, in that order."""
    return re.findall(r"ld\.global(?:\.nc)?\.[bf]32\s+(%r\d+),", ptx)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    obj = tmp_path_factory.mktemp("pair") / "contraction.o"
    run(["mneme-cxx", "-O2", "-c", str(SAMPLES / "record" / "contraction.cu"), "-o", str(obj)])
    (module,) = read_embedded_modules(obj)
    codegen = Codegen.from_module(module.metadata, module.bitcode)
    args = struct.pack("<QQQQQii", 1 << 32, 2 << 32, 3 << 32, 4 << 32, 5 << 32, 0, 1 << 16)
    params = ((0, 8), (8, 8), (16, 8), (24, 8), (32, 8), (40, 4), (44, 4))
    launch = KernelLaunch(PAIR, (256, 1, 1), (256, 1, 1), args, params)
    return module, codegen, launch


def test_specialising_an_argument_fuses_the_other_product(pair):
    """The build (keep=0 at run time) fuses y*z into p + q; specialised to
    keep=0 the store of p goes, p and q tie, and p is fused: another rounding
    from a configuration the rules say keeps the numerics."""
    module, codegen, launch = pair
    assert codegen.contract == "fast"
    base = compile_ptx(module.bitcode, launch, codegen.baseline_config(), module.arch, codegen).ptx
    x, y, z = loaded(base)
    assert set(fused(base)[:2]) == {y, z}
    specialised = codegen.baseline_config(specialize_args=(5,))
    assert numerics_changes(specialised, codegen) == []
    assert probe.applies(specialised, codegen)
    ptx = compile_ptx(module.bitcode, launch, specialised, module.arch, codegen).ptx
    x, y, z = loaded(ptx)
    assert set(fused(ptx)[:2]) == {x, y}
    # With contraction off neither fuses: the two compute the same, bit for bit.
    for config in (probe.without_contraction(specialised), probe.reference(codegen)):
        ptx = compile_ptx(module.bitcode, launch, config, module.arch, codegen).ptx
        assert "fma" not in ptx and len(re.findall(r"mul\.rn\.f32", ptx)) == 2


def test_what_the_probe_takes_on():
    fast, off = Codegen(), Codegen(fp_contract="off")
    assert probe.applies(ReplayConfig(pipeline="default<O1>", specialize_args=(1,)), fast)
    assert probe.applies(ReplayConfig(pipeline="sroa,instcombine"), fast)  # a pass list may
    assert not probe.applies(ReplayConfig(), off)  # nothing fuses in that build
    assert not probe.applies(ReplayConfig(baseline="ir"), fast)
    assert not probe.applies(ReplayConfig(fp_contract="on"), fast)  # declared already
    assert not probe.applies(ReplayConfig(pipeline="default<O0>"), fast)
    assert not probe.applies(ReplayConfig(fp_reassociate=True), fast)
    assert not probe.applies(ReplayConfig(verify={"*": "rtol=1e-6"}), fast)
    reference = probe.reference(fast)
    assert reference.fp_contract == "off" and reference.pipeline == "default<O3>"
    assert not probe.without_contraction(ReplayConfig(pin_contraction=True)).pin_contraction

