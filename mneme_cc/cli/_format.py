"""How commands show things: sizes, launch shapes, an instance's summary and its
determinism, the same in every table and every JSON document."""

from __future__ import annotations


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def shape(dims) -> str:
    return "x".join(str(d) for d in dims)


def determinism(inst) -> dict:
    """What replay found: unknown (never checked), deterministic, or
    nondeterministic with each buffer's spread between identical runs."""
    from mneme_cc.replay.judging.nondeterminism import load

    found = load(inst)
    if found is None:
        return {"state": "unknown", "buffers": [], "unreproduced": []}
    return {"state": found.state, "buffers": found.to_dict()["buffers"],
            "unreproduced": found.unreproduced}


def determinism_note(summary: dict) -> str:
    state = summary["state"]
    if state == "not reproduced":
        return "not reproduced by the application's kernel: " + ", ".join(summary["unreproduced"])
    if state != "nondeterministic":
        return state
    parts = []
    for b in summary["buffers"]:
        spread = f" max ulp {b['max_ulp']}" if b.get("max_ulp") is not None else ""
        parts.append(f"{b['buffer']}{spread}")
    return "nondeterministic: " + ", ".join(parts)


def instance_summary(inst) -> dict:
    return {
        "instance": inst.name, "grid": list(inst.grid), "block": list(inst.block),
        "shared_mem_bytes": inst.shared_mem_bytes, "cooperative": inst.cooperative,
        "raw_bytes": inst.raw_bytes, "stored_bytes": inst.stored_bytes,
        "in_app_ms": inst.in_app_ms, "replayable": inst.replayable, "reasons": inst.reasons,
        "determinism": determinism(inst),
    }
