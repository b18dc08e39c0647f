"""Two device states of one recorded instance, compared buffer by buffer.

A side is the recorded epilogue, a saved replay output
(mneme_cc.replay.output), or a configuration replayed on the fly (saved to a
scratch directory first). Buffers are named as verification names them:
`allocation 0x...` by address, a global by its name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mneme_cc.errors import RecordDBError, UsageError
from mneme_cc.record.db import ALLOCATION, GLOBAL, Instance, RecordDB
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.judging.compare import BufferDiff, diff_buffer, dtype_named
from mneme_cc.replay.output import open_output


def buffer_name(kind: int, name: str, address: int) -> str:
    return name if kind == GLOBAL else f"allocation {address:#x}"


@dataclass
class Side:
    label: str
    database: str
    instance: str
    #: buffer name -> (address, read the bytes)
    buffers: dict[str, tuple[int, Callable[[], np.ndarray]]]
    config: ReplayConfig | None = None
    about: dict[str, Any] = field(default_factory=dict)


def _buffers(snapshot) -> dict[str, tuple[int, Callable[[], np.ndarray]]]:
    return {buffer_name(r.kind, r.name, r.address): (r.address, r.read)
            for r in snapshot.regions if r.kind in (ALLOCATION, GLOBAL)}


def recorded_side(inst: Instance) -> Side:
    return Side("recorded epilogue", str(inst.db.path), inst.name, _buffers(inst.epilogue))


def saved_side(path: Path) -> Side:
    meta, snapshot = open_output(path)
    try:
        config = ReplayConfig.from_json(meta["config"]) if meta.get("config") else None
    except (TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{path}: its configuration is damaged ({exc}); save the output "
                         "again") from None
    return Side(f"saved output {path}", meta["database"], meta["instance"], _buffers(snapshot),
                config, meta)


def replayed_sides(inst: Instance, configs: list[tuple[str, ReplayConfig]], scratch: Path,
                   device: int = 0) -> list[Side]:
    """Replays each (label, config) now, the instance restored once; the state
    after each first launch is a side, saved under scratch (which the caller
    removes once the sides have been read)."""
    from mneme_cc.replay.running.replayer import Replayer

    sides = []
    with Replayer(inst, device=device) as replayer:
        for n, (label, config) in enumerate(configs):
            # The first launch is the state; timing adds nothing here.
            replayer.replay(dataclasses.replace(config, iterations=1, warmup=0),
                            save_output=scratch / f"side{n}")
            sides.append(dataclasses.replace(saved_side(scratch / f"side{n}"), label=label))
    return sides


def parse_dtypes(spec: str | None) -> tuple[str | None, dict[str, str]]:
    """`float32` for every buffer, `KEY=dtype` for one (KEY: arg:N, 0xADDRESS or a
    global's name), comma-separated: (default, per key)."""
    default, per_key = None, {}
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        key, eq, name = item.rpartition("=")
        dtype_named(name)  # says what is wrong with a bad name
        if eq:
            per_key[key] = name
        elif default is None:
            default = name
        else:
            raise UsageError(f"--dtype '{spec}': two defaults ({default}, {name}); give "
                             "KEY=dtype for single buffers")
    return default, per_key


def resolve_dtypes(inst: Instance | None, spec: str | None,
                   configs: list[ReplayConfig | None]) -> dict[str, str]:
    """Buffer name -> dtype. Most specific first: --dtype KEY=dtype, the sides'
    verification policies, --dtype's default, the kernel's IR (pointer
    parameters used as one element type)."""
    from mneme_cc.replay.judging.verify import policies_for

    default, per_key = parse_dtypes(spec)
    out: dict[str, str] = {}
    from mneme_cc.replay.judging.dtypes import argument_dtypes

    keyed: dict[str, Any] = {} if default or inst is None else argument_dtypes(inst)
    for config in configs:
        if config is not None:
            keyed.update({k: v["dtype"] for k, v in config.verify.items() if v.get("dtype")})
    keyed.update(per_key)
    if keyed:
        if inst is None and any(k.startswith("arg:") for k in keyed):
            raise UsageError("--dtype arg:N needs the instance's arguments: give -rdb DIR")
        args = (inst.params, inst.args, inst.prologue.allocations) if inst else ([], b"", [])
        policies = policies_for({k: {"dtype": v} for k, v in keyed.items()}, *args)
        out.update({name: p.dtype for name, p in policies.items()})
    if default:
        out["*"] = default
    return out


def diff(a: Side, b: Side, dtypes: dict[str, str] | None = None, first: int = 8,
         histogram: bool = False) -> list[BufferDiff]:
    """Every buffer of the two sides, A as the reference."""
    if a.instance != b.instance:
        raise UsageError(f"the sides are different instances ({a.label}: {a.instance}; "
                         f"{b.label}: {b.instance}): diff compares two states of one instance")
    only_a, only_b = sorted(set(a.buffers) - set(b.buffers)), sorted(set(b.buffers) - set(a.buffers))
    if only_a or only_b:
        raise UsageError(f"the sides hold different buffers (only in {a.label}: "
                         f"{', '.join(only_a) or '-'}; only in {b.label}: "
                         f"{', '.join(only_b) or '-'})")
    dtypes = dtypes or {}
    out = []
    for name in sorted(a.buffers, key=lambda n: (not n.startswith("allocation"), n)):
        address, read_a = a.buffers[name]
        out.append(diff_buffer(name, address, read_a(), b.buffers[name][1](),
                               dtypes.get(name, dtypes.get("*")), first, histogram))
    return out


def instance_of(side: Side, database: Path | None = None) -> Instance | None:
    """The recorded instance a saved side came from, when its database is here."""
    path = Path(database or side.database)
    if not (path / "database.json").exists():
        return None
    try:
        return RecordDB(path).find(rid=side.instance)
    except RecordDBError:
        return None
