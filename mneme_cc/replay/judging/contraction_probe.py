"""Whether a failed verification is the back end fusing other multiply-adds.

Under `-ffp-contract=fast` the code generator fuses a multiply into an add
where the optimised IR lets it: which of two products it fuses depends on
their uses and on the blocks the pipeline leaves, so a specialisation, a
pipeline or an unrolling choice may fuse other pairs than the build did and
round differently, with no error anywhere (the rules in
mneme_cc.replay.compiling.numerics cannot tell in advance). When a
configuration that keeps the build's numerics by those rules fails, the
replayer runs it once more with contraction off and compares that bit for
bit, on the device, with the build's IR at the recorded settings, also
with contraction off (its outputs kept on the device for the session).
Equal: the configuration computes what the build computes and only fuses
differently, a numerics change (`REASON`). Different: something else
changed the result, a miscompile to bisect.
"""

from __future__ import annotations

import dataclasses

from mneme_cc.replay.compiling.numerics import Codegen, changes
from mneme_cc.replay.config import ReplayConfig

REASON = ("fuses other multiply-adds than the build (with contraction off it computes bit for "
          "bit what the build's IR computes with contraction off)")


def applies(config: ReplayConfig, codegen: Codegen) -> bool:
    """Whether a failure of config can be probed: an IR compile of a build
    that fuses, verified bit for bit, whose only declared changes (if any)
    are those that merely may change the fusion (a pass list)."""
    return (config.baseline is None and codegen.contracts and not config.verify
            and not config.fp_reassociate and config.fp_contract in (None, codegen.contract)
            and all(code == "pass_list" for code, _ in changes(config, codegen)))


def without_contraction(config: ReplayConfig) -> ReplayConfig:
    """The same configuration, nothing fused."""
    return dataclasses.replace(config, fp_contract="off", pin_contraction=False)


def reference(codegen: Codegen) -> ReplayConfig:
    """The build's IR at the recorded settings, nothing fused."""
    return without_contraction(codegen.baseline_config())

