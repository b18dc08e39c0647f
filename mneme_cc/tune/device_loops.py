"""A tuning loop per GPU. With several devices, the study's loop runs once
per device: the tuner's own on the first, and one process per other device,
each with its GPU's replay worker, its share of the compile processes and
askers, on the same study (as processes on several hosts share one).

One loop's asks, writes and tells cost milliseconds of Python a trial on a
GPU machine's processor (docs/tune.md, *The tuning suite*): one loop
feeding two GPUs set a short kernel's pace (wave3d: 1.57x one GPU's),
where two `mneme tune` processes on one study, a GPU each, reached 1.85x.
Each loop judges its own trials, so a configuration may run on two GPUs;
the study still holds every trial once.

The tuner's study is made ready first (its queue, the application's
settings and warm start's trials enqueued): the other loops start their
workers and baselines meanwhile, and begin asking once it is. A loop
stops as at its deadline when the study's tuner says so (SIGTERM) or dies
(the kernel sends the SIGTERM then), closing what it has in flight. Each
loop counts its trials and verified trials in memory the study's tuner
reads, so that its live table shows every GPU's.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import time
from typing import Any

from mneme_cc.replay import outcome as oc
from mneme_cc.tune.askers import automatic_count

_SPAWN = multiprocessing.get_context("spawn")  # CUDA state must not be forked
#: Seconds a loop may take past the study's end to close its trials and
#: answer, before it is killed; and once told to stop.
CLOSE_GRACE_S, STOP_GRACE_S = 30.0, 10.0


def wanted(settings) -> bool:
    """A loop per device: several devices, one objective (the study's best is
    then one trial every loop can adopt) and not SQLite, which takes one
    writer at a time (as for askers)."""
    return settings.loop_per_device and len(settings.devices) > 1 and \
        len(settings.objectives) == 1 and not (settings.storage or "").startswith("sqlite")


def settings_for(settings, device: int, index: int, loops: int):
    """The settings of the loop on `device`, the `index`-th of `loops`: its
    share of the compile processes (at least one) and of the askers (as many
    as the study would have had in all), and its own seed (the same one
    would propose the same configurations)."""
    def share(total: int) -> int:
        return total // loops + (index < total % loops)

    workers = settings.compile_workers or os.cpu_count() or 1
    askers = automatic_count(gpus=loops) if settings.askers is None else settings.askers
    return dataclasses.replace(
        settings, devices=[device], compile_workers=max(1, share(workers)),
        askers=share(askers), seed=None if settings.seed is None else settings.seed + index,
        resume=True)


class DeviceLoops:
    """The loops on the devices after the first, in processes of their own."""

    def __init__(self, tuner):
        s = tuner.settings
        devices = s.devices
        self.ready = _SPAWN.Event()  # set once the tuner's study is ready
        self.loops: list[tuple[int, Any, Any]] = []  # (device, process, connection)
        # Per other loop: its trials and verified trials so far (each written
        # by its loop alone).
        self.counts = _SPAWN.RawArray("q", 2 * (len(devices) - 1))
        self.devices = devices[1:]
        deadline = None if tuner.deadline is None else time.time() + tuner._remaining()
        try:
            for index, device in enumerate(devices[1:], start=1):
                conn, child = _SPAWN.Pipe(duplex=False)
                # Not a daemon: its executor starts processes of its own.
                process = _SPAWN.Process(target=_main, args=(
                    child, os.getpid(), type(tuner), str(tuner.instance.db.path),
                    tuner.instance.name, settings_for(s, device, index, len(devices)),
                    tuner.given_props, tuner.executor, self.ready, deadline,
                    self.counts, index - 1))
                process.start()
                child.close()
                self.loops.append((device, process, conn))
        except BaseException:
            self.close(None)
            raise

    def study_ready(self) -> None:
        self.ready.set()

    def progress(self) -> list[tuple[int, int, int]]:
        """(device, trials, verified trials) of each other loop so far."""
        return [(device, self.counts[2 * i], self.counts[2 * i + 1])
                for i, device in enumerate(self.devices)]

    def close(self, grace: float | None = CLOSE_GRACE_S) -> list[dict[str, Any]]:
        """Each loop's summary (or why it has none), once it ended; a loop
        still running after `grace` seconds is killed. None: the study stops
        (an error, Ctrl-C): each loop stops as at its deadline first."""
        if grace is None:
            self._stop()
            grace = STOP_GRACE_S
        self.ready.set()  # a loop waiting for the study does not wait on
        ended = time.monotonic() + grace
        out = []
        try:
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
                    answer = {"error": f"the loop on device {device} ended without a "
                                       f"summary (exit status {process.exitcode})"}
                out.append({"device": device, **answer})
        except BaseException:  # Ctrl-C while waiting: none is left running
            self._stop()
            raise
        finally:
            for _, _, conn in self.loops:
                conn.close()
        self.loops = []
        return out

    def _stop(self) -> None:
        for _, process, _ in self.loops:
            if process.is_alive():
                process.terminate()  # the loop's signal to stop (_main)


def _main(conn, parent: int, tuner_class, db_path: str, name: str, settings, props,
          executor, ready, deadline: float | None, counts, slot: int) -> None:
    """A loop's process: a tuner (of the study's tuner's class) on one device
    that joins the study, counting its trials in counts[2 * slot] and its
    verified ones in counts[2 * slot + 1]."""
    # The study's tuner says when to stop (SIGTERM); a Ctrl-C at the terminal
    # reaches that tuner, which does. The kernel sends the SIGTERM too if the
    # study's tuner dies.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    joined: list = []

    def stop(signum, frame):
        if not joined:
            raise KeyboardInterrupt
        joined[0].stop()

    signal.signal(signal.SIGTERM, stop)
    if not _ends_with(parent):
        return
    from mneme_cc.errors import MnemeError
    from mneme_cc.tune.workers import _instance

    def counted(tuner, _result) -> None:  # as of each tell (with what was pruned unrun)
        counts[2 * slot] = sum(tuner.counts.values())
        counts[2 * slot + 1] = oc.passed(tuner.counts)

    try:
        tuner = tuner_class(_instance(db_path, name), settings, on_trial=counted, props=props,
                            executor=executor)
        tuner.joining = ready
        if deadline is not None:  # the study's, not one that starts now
            settings.timeout = max(0.001, deadline - time.time())
        joined.append(tuner)
        answer = {"summary": tuner.run()}
    except KeyboardInterrupt:
        answer = {"error": "stopped before it began"}
    except MnemeError as exc:
        answer = {"error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - said to the tuner, which goes on
        answer = {"error": f"{type(exc).__name__}: {exc}"}
    try:
        conn.send(answer)
    except OSError:  # the study's tuner is gone
        pass


def _ends_with(parent: int) -> bool:
    """Asks the kernel for a SIGTERM when the parent dies (Linux); False if
    it has died already."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    return os.getppid() == parent


def live_progress(tuner, summary: dict[str, Any]) -> list[tuple[int, int, int]]:
    """(device, trials, verified trials) of each loop of tuner's study, for
    its live table: its own summary's and the other loops' counts while they
    run, the merged summary's rows once they ended; [] with one loop."""
    if summary.get("devices"):
        return [(d["device"], d["trials"], d["verified"]) for d in summary["devices"]
                if "trials" in d]
    if not tuner.device_loops:
        return []
    verified = oc.passed(summary["outcomes"])
    return [(tuner.settings.devices[0], summary["trials"], verified),
            *tuner.device_loops.progress()]


#: Summary fields that add up over the loops.
_SUMMED = ("trials", "raced", "settled", "worker_restarts")


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
            "verified": oc.passed(summary["outcomes"]),
            "verified_per_second": summary["verified_per_second"]}
