"""The outcomes: every replay, and every tuning trial, ends in exactly one.

    verified             the first launch reproduced the epilogue; the time counts
    nondeterministic     it reproduced the epilogue except for buffers that differ
                         between identical runs of the application's own kernel,
                         and those within their spread; the time counts
    failed_verification  it ran and computed something else
    compile_error        the JIT, LLVM or ptxas refused the configuration
    invalid_launch       the driver refused the launch (geometry, resources)
    runtime_error        the kernel faulted (illegal address, trap, ...) or its
                         worker died; the worker is replaced
    timeout              the trial ran past its time limit; the worker is killed
    compile_timeout      compiling ran past its limit; the compile process is killed
    cancelled            the study's deadline came first; the trial was stopped

A replay ends in one of the first three (mneme_cc.replay.Replayer); a trial
in any (mneme_cc.tune). Only `verified` and `nondeterministic` trials have a
time, and only they can be best. A configuration that would change the
build's numerics in a study that verifies bit for bit is not run at all: its
trial is pruned and counted as `numerics_changing`; one the device cannot
run (resources the baseline shows it needs) is pruned as `infeasible`. A
trial that ran and failed, and whose failure the replay explains as a
numerics change (the contraction probe: it fuses other multiply-adds than
the build), is `numerics_changing` too: in a bitwise study,
`failed_verification` is left to what computes something else.
"""

from __future__ import annotations

VERIFIED = "verified"
NONDETERMINISTIC = "nondeterministic"
FAILED_VERIFICATION = "failed_verification"
COMPILE_ERROR = "compile_error"
INVALID_LAUNCH = "invalid_launch"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
COMPILE_TIMEOUT = "compile_timeout"
CANCELLED = "cancelled"
OUTCOMES = (VERIFIED, NONDETERMINISTIC, FAILED_VERIFICATION, COMPILE_ERROR, INVALID_LAUNCH,
            RUNTIME_ERROR, TIMEOUT, COMPILE_TIMEOUT, CANCELLED)
PASSED = (VERIFIED, NONDETERMINISTIC)
NUMERICS_CHANGING = "numerics_changing"  # pruned, or found so after it ran
INFEASIBLE = "infeasible"  # pruned, not run


def passed(counts) -> int:
    """How many of the outcomes counted (outcome -> count) passed verification."""
    return sum(counts.get(o, 0) for o in PASSED)


#: How a replay says the device lost its context in a probe's run (the
#: application's kernel, or the build's IR, at the recorded geometry), not
#: in the configuration's own launches.
PROBE_FAULT = "a probe's run lost the device's context: "

# Driver errors that refuse a launch without harming the context.
_LAUNCH_REFUSALS = {
    "CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
    "CUDA_ERROR_INVALID_CONFIGURATION", "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
    "CUDA_ERROR_INVALID_CLUSTER_SIZE", "CUDA_ERROR_NOT_SUPPORTED",
}
# Errors loading a compiled image: the binary, not the launch, is at fault.
_IMAGE_ERRORS = {"CUDA_ERROR_INVALID_IMAGE", "CUDA_ERROR_INVALID_PTX", "CUDA_ERROR_NO_BINARY_FOR_GPU",
                 "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"}
# Errors the driver keeps (sticky): the context is lost and so is the worker.
STICKY = {
    "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ASSERT", "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_ECC_UNCORRECTABLE", "CUDA_ERROR_CONTEXT_IS_DESTROYED",
}


def classify_device_error(code: str | None) -> str:
    """The outcome of a trial whose replay raised a DeviceError with this code."""
    if code in _IMAGE_ERRORS:
        return COMPILE_ERROR
    return INVALID_LAUNCH if code in _LAUNCH_REFUSALS else RUNTIME_ERROR
