"""A tuning loop per GPU. With several devices, the study's loop runs once
per device: the tuner's own on the first, and one process per other device,
each with its GPU's replay worker, its share of the compile processes and
askers, on the same study (as processes on several hosts share one).

One loop's asks, writes and tells cost milliseconds of Python a trial on a
GPU machine's processor (docs/tune.md, *The tuning suite*): a short
kernel's study on two GPUs waited for it (wave3d: 1.57x one GPU's pace)
where a loop per GPU reached 1.85x. Each loop judges its own trials, so a
configuration may run on two GPUs; the study still holds every trial once.

The tuner's study is made ready first (its queue, the application's
settings and warm start's trials enqueued): the other loops start their
workers and baselines meanwhile, and begin asking once it is.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import time
from typing import Any

from mneme_cc.replay import outcome as oc

_SPAWN = multiprocessing.get_context("spawn")  # CUDA state must not be forked
#: Seconds a loop may take past the study's deadline to close its trials and
#: answer, before it is stopped; and once interrupted.
CLOSE_GRACE_S, STOP_GRACE_S = 30.0, 10.0


def settings_for(settings, device: int, index: int, loops: int):
    """The settings of the loop on `device`, the `index`-th of `loops`: its
    share of the compile processes and of asker processes the user set, and
    its own seed (the same one would propose the same configurations)."""
    def share(total: int) -> int:
        return total // loops + (index < total % loops)

    workers = settings.compile_workers or os.cpu_count() or 1
    return dataclasses.replace(
        settings, devices=[device], compile_workers=max(1, share(workers)),
        askers=None if settings.askers is None else share(settings.askers),
        seed=None if settings.seed is None else settings.seed + index, resume=True)


class DeviceLoops:
    """The loops on the devices after the first, in processes of their own."""

    def __init__(self, tuner):
        s = tuner.settings
        devices = s.devices
        self.ready = _SPAWN.Event()  # set once the tuner's study is ready
        self.loops: list[tuple[int, Any, Any]] = []  # (device, process, connection)
        deadline = None if tuner.deadline is None else time.time() + tuner._remaining()
        try:
            for index, device in enumerate(devices[1:], start=1):
                conn, child = _SPAWN.Pipe(duplex=False)
                # Not a daemon: its executor starts processes of its own.
                process = _SPAWN.Process(target=_main, args=(
                    child, type(tuner), str(tuner.instance.db.path), tuner.instance.name,
                    settings_for(s, device, index, len(devices)), tuner.given_props,
                    tuner.executor, self.ready, deadline))
                process.start()
                child.close()
                self.loops.append((device, process, conn))
        except BaseException:
            self.close(0.0)
            raise

    def study_ready(self) -> None:
        self.ready.set()

    def close(self, grace: float | None = CLOSE_GRACE_S) -> list[dict[str, Any]]:
        """Each loop's summary (or its error), once it ended; a loop still
        running after `grace` seconds is stopped. None: the study stops (an
        error, Ctrl-C): each loop is interrupted, closes its trials and ends."""
        if grace is None:
            for _, process, _ in self.loops:
                if process.is_alive():
                    process.terminate()  # taken as Ctrl-C there (_main)
            grace = STOP_GRACE_S
        self.ready.set()  # a loop waiting for the study does not wait on
        ended = time.monotonic() + grace
        out = []
        for device, process, conn in self.loops:
            answer = None
            if conn.poll(max(0.0, ended - time.monotonic())):
                try:
                    answer = conn.recv()
                except (EOFError, OSError):
                    pass
            process.join(max(0.0, ended - time.monotonic()) if answer else 0.0)
            if process.is_alive():
                process.kill()
                process.join()
            if not isinstance(answer, dict):
                answer = {"error": f"the loop on device {device} ended without a summary "
                                   f"(exit status {process.exitcode})"}
            out.append({"device": device, **answer})
            conn.close()
        self.loops = []
        return out


def _main(conn, tuner_class, db_path: str, name: str, settings, props, executor, ready,
          deadline: float | None) -> None:
    """A loop's process: a tuner (of the study's tuner's class) on one device
    that joins the study."""
    # The study's tuner says when to stop (SIGTERM, taken as Ctrl-C), once:
    # a Ctrl-C at the terminal reaches it too, and a second interrupt would
    # cut the closing of this loop's trials short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _interrupted)
    from mneme_cc.errors import MnemeError
    from mneme_cc.tune.workers import _instance

    try:
        if deadline is not None:
            settings.timeout = max(0.001, deadline - time.time())
        tuner = tuner_class(_instance(db_path, name), settings, props=props, executor=executor)
        tuner.joining = ready
        summary = tuner.run()
        conn.send({"summary": summary})
    except KeyboardInterrupt:
        conn.send({"error": "interrupted"})
    except MnemeError as exc:
        conn.send({"error": str(exc)})
    except Exception as exc:  # noqa: BLE001 - said to the tuner, which goes on
        conn.send({"error": f"{type(exc).__name__}: {exc}"})


def _interrupted(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


#: Summary fields that add up over the loops.
_SUMMED = ("trials", "raced", "worker_restarts")


def merged(own: dict[str, Any], loops: list[dict[str, Any]], device: int) -> dict[str, Any]:
    """The study's summary from the tuner's own and the other loops': counts
    and paces add up (over the tuner's seconds), time_spent is summed over
    the loops (its `wall` is the tuner's), `devices` has each loop's own."""
    out = dict(own)
    ran = [loop["summary"] for loop in loops if "summary" in loop]
    for key in _SUMMED:
        out[key] = own.get(key, 0) + sum(s.get(key) or 0 for s in ran)
    outcomes: dict[str, int] = dict(own["outcomes"])
    spent: dict[str, float] = dict(own["time_spent"])
    for s in ran:
        for k, v in s["outcomes"].items():
            outcomes[k] = outcomes.get(k, 0) + v
        for k, v in s["time_spent"].items():
            if k != "wall":
                spent[k] = spent.get(k, 0.0) + v
    out["outcomes"], out["time_spent"] = outcomes, dict(sorted(spent.items()))
    seconds = own["seconds"] or 0.0
    for key in ("observations_per_second", "verified_per_second",
                "distinct_verified_per_second"):
        out[key] = own[key] + sum(s[key] * s["seconds"] / seconds if seconds else 0.0
                                  for s in ran)
    asked = [s["askers"] for s in (own, *ran) if s.get("askers")]
    out["askers"] = {"processes": sum(a["processes"] for a in asked),
                     "trials": sum(a["trials"] for a in asked),
                     "stopped": next((a["stopped"] for a in asked if a["stopped"]), None)} \
        if asked else None
    out["devices"] = [_device_row(device, own)] + [
        _device_row(loop["device"], loop["summary"]) if "summary" in loop
        else {"device": loop["device"], "error": loop["error"]} for loop in loops]
    return out


def _device_row(device: int, summary: dict[str, Any]) -> dict[str, Any]:
    return {"device": device, "trials": summary["trials"],
            "verified": sum(summary["outcomes"].get(o, 0) for o in oc.PASSED),
            "verified_per_second": summary["verified_per_second"],
            "best_median_ms": summary["best_median_ms"]}
