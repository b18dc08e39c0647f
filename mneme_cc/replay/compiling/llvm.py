"""The replay's LLVM: llvmlite's binding, initialised once, and the pass names a
pipeline may list."""

from __future__ import annotations

import functools

from mneme_cc.errors import UsageError
from mneme_cc.replay.compiling.mutations import MUTATIONS
from mneme_cc.replay.compiling.pipeline import Pipeline


@functools.cache
def llvm_binding():
    """llvmlite.binding with every target and asm printer ready (NVPTX among
    them), with the LLVM option clang sets for every CUDA device compile,
    NVPTX's FMA peephole off (replay runs it itself, contraction.fold_fma),
    and the order of each value's uses kept in the text form: passes visit
    uses in that order, so the recorded order (the plugin writes it into the
    bitcode) makes the pipeline see the module as clang's did."""
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    llvm.set_option("mneme", "-enable-memcpyopt-without-libcalls")
    llvm.set_option("mneme", "-disable-nvptx-ir-peephole")
    llvm.set_option("mneme", "-preserve-ll-uselistorder")
    return llvm


@functools.cache
def named_passes() -> dict[str, str]:
    """Pass names a pipeline may list -> llvmlite's ModulePassManager method."""
    llvm = llvm_binding()
    methods = [m for m in dir(llvm.ModulePassManager)
               if m.startswith("add_") and m.endswith("_pass")]
    # Printers and viewers write files or open windows: not optimisations.
    names = {m[4:-5].replace("_", "-"): m for m in methods
             if not any(word in m for word in ("printer", "viewer", "aa_eval"))}
    # LLVM's own spellings of the common ones.
    aliases = {"instcombine": "instruction-combine", "gvn": "new-gvn", "dce": "dead-code-elimination",
               "adce": "aggressive-dce", "dse": "dead-store-elimination", "simplifycfg": "simplify-cfg",
               "loop-unroll": "loop-unroll", "licm": None,
               "inline": "always-inliner", "globaldce": "global-dead-code-eliminate",
               "memcpyopt": "mem-copy-opt", "reassociate": "reassociate"}
    for alias, target in aliases.items():
        if target in names:
            names[alias] = names[target]
    return names


def pipeline_of(text: str) -> Pipeline:
    """A pipeline whose pass names this LLVM (or mneme's mutations) knows."""
    known = {**named_passes(), **MUTATIONS}
    pipeline = Pipeline.parse(text)
    unknown = [p for p in pipeline.passes if p not in known]
    if unknown:
        raise UsageError(f"unknown pass(es) in pipeline '{text.strip()}': {', '.join(unknown)}; "
                         f"use default<O0>..default<O3> or a comma list of: "
                         f"{', '.join(sorted(known))}")
    return pipeline
