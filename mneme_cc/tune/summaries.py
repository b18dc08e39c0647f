"""What a study writes as it goes: a line of trials.jsonl per trial,
summary.json and best.json (mneme_cc.tune.tuner)."""

from __future__ import annotations

import datetime
import time
from typing import Any

from mneme_cc.replay import outcome as oc
from mneme_cc.tune import verdict as verdicts
from mneme_cc.tune import warm_start


def trial_line(number: int, params: dict[str, Any], result, duplicate: bool,
               values: list[float] | None) -> dict[str, Any]:
    """trials.jsonl's line for a finished trial (result: a TrialResult)."""
    return {"trial": number, "params": params, "outcome": result.outcome,
            "duplicate": duplicate, "median_ms": result.median_ms, "values": values,
            "samples_ms": result.samples_ms, "raced": result.raced, "settled": result.settled,
            "registers": result.registers,
            "spill_bytes": result.spill_bytes, "occupancy": result.occupancy,
            "cubin_bytes": result.cubin_bytes, "error": result.error,
            "seconds": result.seconds, "stage_seconds": result.stage_seconds(),
            "time": datetime.datetime.now(datetime.UTC).isoformat(),
            "config": result.config.to_dict()}


def summary(tuner) -> dict[str, Any]:
    """summary.json: what the study found, how fast, and where its time went."""
    elapsed = time.perf_counter() - tuner.started
    done = sum(tuner.counts.values())
    return {
        "study": tuner.name, "instance": tuner.instance.name,
        "kernel": tuner.instance.kernel_name, "space": tuner.settings.space,
        "sampler": tuner.settings.sampler, "objectives": tuner.settings.objectives,
        "trials": done, "outcomes": dict(tuner.counts), "seconds": elapsed,
        "timed_launches": {k: tuner.space.run[k] for k in ("iterations", "warmup")},
        "raced": tuner.raced, "settled": tuner.settled,
        "learned_numerics": tuner.learned.summary(),
        "observations_per_second": done / elapsed if elapsed else 0.0,
        "verified_per_second": oc.passed(tuner.counts) / elapsed
        if elapsed else 0.0,
        "distinct_verified_per_second": oc.passed(tuner.distinct) / elapsed
        if elapsed else 0.0,
        "baseline": tuner.baseline.to_dict() if tuner.baseline else None,
        "best_median_ms": tuner.best.median_ms if tuner.best else None,
        **verdicts.against_application(tuner.baseline, tuner.best),
        "worker_restarts": tuner.restarts,
        "askers": {"processes": len(tuner.askers.processes), "trials": tuner.askers.delivered,
                   "stopped": tuner.askers.broken} if tuner.askers else None,
        "warm_start": warm_start.seeded(tuner.study),
        "trials_to_near_best": warm_start.trials_to_near_best(tuner.study),
        "time_spent": dict(sorted(tuner.time_spent.items())),
        "storage": tuner.storage_name,
        "device": tuner.props.to_dict(), "output": str(tuner.out),
    }


def best_record(tuner) -> dict[str, Any] | None:
    """What `mneme export` reads: the best verified config and its launch."""
    if tuner.best is None:
        return None
    inst = tuner.instance
    return {
        "kernel": inst.kernel_name, "demangled": inst.demangled,
        "instance": inst.name, "study": tuner.name,
        "launch": {"grid": list(inst.grid), "block": list(inst.block),
                   "shared_mem_bytes": inst.shared_mem_bytes},
        "config": tuner.best.config.to_dict(),
        "median_ms": tuner.best.median_ms, "samples_ms": tuner.best.samples_ms,
        "baseline_ms": tuner.baseline.median_ms if tuner.baseline and tuner.baseline.verified
        else None, **verdicts.against_application(tuner.baseline, tuner.best),
        "beats_application": verdicts.beats_application(tuner.baseline, tuner.best),
        "registers": tuner.best.registers, "assembler": tuner.assembler,
        "device": tuner.props.name, "arch": tuner.props.arch,
    }
