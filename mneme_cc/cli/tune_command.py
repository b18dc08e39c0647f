"""`mneme tune -rdb DIR [-rid ID] --space ... --sampler ... --trials N ...`.

Tunes one instance, or every replayable instance of the database in turn.
Results go to the Optuna storage and to DIR/tune/<study>/ (trials.jsonl,
best.json, summary.json). Exit status: 0 when a verified configuration was
found for every instance tuned, 1 otherwise, 2 for usage errors.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli._errors import reports_errors
from mneme_cc.cli._options import int_list


def _devices(text: str) -> list[int]:
    from mneme_cc.errors import UsageError

    devices = list(int_list(text, "--devices", "a list of GPU ordinals"))
    if not devices:
        raise UsageError("--devices names no GPU")
    if min(devices) < 0 or len(set(devices)) < len(devices):
        raise UsageError(f"--devices {text}: GPU ordinals (0, 1, ...), each once")
    return devices


@reports_errors
def tune(
    database: Annotated[Path, typer.Option("-rdb", "--rdb", help="The record database.")],
    rid: Annotated[Optional[str], typer.Option("-rid", "--rid", help="One instance; default: "
                                               "every replayable instance in turn.")] = None,
    kernel: Annotated[Optional[str], typer.Option(help="Only this kernel's instances.")] = None,
    space: Annotated[str, typer.Option(help="auto (what matters for the kernel), quick, "
                                       "proteus, standard, full, geometry, grid-stride, or "
                                       "path.py:Class.")] = "auto",
    sampler: Annotated[str, typer.Option(help="tpe, random, exhaustive, gp, cmaes, nsga2.")]
    = "tpe",
    trials: Annotated[int, typer.Option(help="Trials per instance.")] = 100,
    timeout: Annotated[Optional[float], typer.Option(help="Seconds per instance.")] = None,
    trial_timeout: Annotated[float, typer.Option(help="Seconds one trial may run.")] = 60.0,
    compile_timeout: Annotated[float, typer.Option(
        help="Seconds one compile may take; past it the compile process is killed.")] = 60.0,
    objective: Annotated[str, typer.Option(help="time, registers, cubin_size; comma list for "
                                           "a Pareto front.")] = "time",
    workers: Annotated[Optional[int], typer.Option(help="Compile processes (default: cores).")]
    = None,
    askers: Annotated[Optional[int], typer.Option(
        help="Processes asking the sampler beside the loop (default: 2 per GPU, as the "
             "cores allow: one per 4 cores less one; 0: the loop asks by itself).")] = None,
    devices: Annotated[str, typer.Option(help="GPU ordinals, e.g. 0,1.")] = "0",
    loop_per_device: Annotated[bool, typer.Option(
        "--loop-per-device/--one-loop",
        help="With several devices, a tuning loop (a process) per device on the study, "
             "each with its share of the compile processes and askers; --one-loop: one "
             "loop feeds every device.")] = True,
    storage: Annotated[Optional[str], typer.Option(help="Optuna storage URL or journal file "
                                                   "(default: a journal file in the study's "
                                                   "directory).")] = None,
    study: Annotated[Optional[str], typer.Option(help="Study name (one instance only).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue an existing study.")] = False,
    iterations: Annotated[Optional[int], typer.Option(
        help="Timed launches per trial (default: enough for about 5 ms of the application's "
             "kernel time, between 5 and 20).")] = None,
    warmup: Annotated[Optional[int], typer.Option(
        help="Untimed launches first (default: 1).")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Sampler seed.")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Output directory (one instance only).")]
    = None,
    verify: Annotated[Optional[Path], typer.Option(
        help="Per-buffer verification policies as JSON (docs/replay.md) for every trial; "
             "default: bitwise.")] = None,
    allow_numerics_change: Annotated[bool, typer.Option(
        "--allow-numerics-change",
        help="Also run configurations that change the build's floating-point numerics "
             "(O0 pipelines, fp_contract, reassociation); a bitwise study leaves them out.")]
    = False,
    warm_start: Annotated[bool, typer.Option(
        "--warm-start/--no-warm-start",
        help="First try the best configurations of the kernel's other instances and of "
             "kernels with similar IR tuned in this database.")] = True,
    race: Annotated[bool, typer.Option(
        "--race/--no-race",
        help="Stop timing a trial after 3 launches when each was slower than the best "
             "so far by more than its own spread explains (2-25%), or after 5 that agree "
             "within 0.5%; --no-race times every trial in full.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summaries as JSON.")] = False,
) -> None:
    """Search configurations of recorded instances; keep the best verified one."""
    from mneme_cc.cli._options import policies_file
    from mneme_cc.errors import UsageError
    from mneme_cc.tune.presets import check_space_name
    from mneme_cc.tune.samplers import SAMPLERS, parse_objectives
    from mneme_cc.tune.tuner import Tuner, TuneSettings

    objectives = parse_objectives(objective)
    if sampler not in SAMPLERS:
        raise UsageError(f"unknown sampler '{sampler}': use one of {', '.join(SAMPLERS)}")
    check_space_name(space)  # before any GPU is taken
    _devices(devices)
    _check_counts(trials=trials, timeout=timeout, trial_timeout=trial_timeout,
                  compile_timeout=compile_timeout,
                  workers=workers, seed=seed, iterations=iterations, warmup=warmup,
                  askers=askers)
    instances = _instances(database, rid, kernel)
    if len(instances) > 1 and (study or out):
        raise UsageError("--study and --out name one study: choose one instance with -rid")
    interactive = sys.stdout.isatty() and not as_json
    summaries = []
    for inst in instances:
        settings = TuneSettings(
            space=space, sampler=sampler, trials=trials, timeout=timeout,
            objectives=objectives, devices=_devices(devices), compile_workers=workers,
            askers=askers,
            trial_timeout=trial_timeout, compile_timeout=compile_timeout,
            iterations=iterations, warmup=warmup, storage=storage,
            study_name=study, resume=resume, seed=seed, out_dir=out,
            verify=policies_file(verify), allow_numerics_change=allow_numerics_change,
            warm_start=warm_start, race=race, loop_per_device=loop_per_device)
        summaries.append(_tune_one(inst, settings, Tuner, interactive))
    if not interactive:
        print(json.dumps(summaries if len(summaries) > 1 else summaries[0], indent=2))
    if any(s["best_median_ms"] is None for s in summaries):
        raise typer.Exit(1)


def _check_counts(*, trials, timeout, trial_timeout, compile_timeout, workers, seed, iterations,
                  warmup, askers=None) -> None:
    from mneme_cc.errors import UsageError

    if trials < 1:
        raise UsageError("--trials must be at least 1")
    for flag, seconds in (("--timeout", timeout), ("--trial-timeout", trial_timeout),
                          ("--compile-timeout", compile_timeout)):
        if seconds is not None and not seconds > 0:
            raise UsageError(f"{flag} must be a positive number of seconds, not {seconds}")
    for flag, value, least in (("--workers", workers, 1), ("--seed", seed, 0), ("--askers", askers, 0),
                               ("--iterations", iterations, 1), ("--warmup", warmup, 0)):
        if value is not None and value < least:
            raise UsageError(f"{flag} must be at least {least}, not {value}")


def _instances(database: Path, rid, kernel) -> list:
    """The replayable instances to tune: one (-rid), a kernel's, or every one."""
    from mneme_cc.cli._options import find_instance
    from mneme_cc.errors import UsageError
    from mneme_cc.record import RecordDB

    db = RecordDB(database)
    if rid:
        instances = [find_instance(database, rid, kernel)]
    elif kernel:
        instances = [i for i in db.instances if i.static_hash == db.kernel(kernel).static_hash]
    else:
        instances = db.instances
    instances = [i for i in instances if i.replayable]
    if not instances:
        raise UsageError(f"no replayable instance in {database} to tune (`mneme ls` says why)")
    return instances


def _tune_one(inst, settings, tuner_class, interactive: bool) -> dict:
    summary = _run_one(inst, settings, tuner_class, interactive)
    for loop in summary.get("devices") or []:  # the study went on without it
        if "error" in loop:
            print(f"mneme tune: the loop on device {loop['device']} stopped: {loop['error']}",
                  file=sys.stderr)
    return summary


def _run_one(inst, settings, tuner_class, interactive: bool) -> dict:
    if not interactive:
        return tuner_class(inst, settings).run()
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    from mneme_cc.tune.device_loops import live_progress

    console = Console()
    console.print(f"[bold]{inst.demangled}[/] {inst.name}")

    def table(tuner) -> Table:
        s = tuner.summary()
        grid = Table.grid(padding=(0, 2))
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(s["outcomes"].items())) or "-"
        best = f"{s['best_median_ms']:.4f} ms" if s["best_median_ms"] else "-"
        speedup = f"{s['speedup']:.3f}x" if s["speedup"] else "-"
        loops = live_progress(tuner, s)  # a loop per GPU: every loop's trials
        trials = sum(t for _, t, _ in loops) if loops else s["trials"]
        grid.add_row("trials", f"{trials}/{settings.trials}", "outcomes", outcomes)
        if loops:
            grid.add_row("per GPU", ", ".join(f"{d}: {t} ({v} verified)" for d, t, v in loops),
                         "", "")
        grid.add_row("best", best, "speedup", speedup)
        grid.add_row("verdict", s["verdict"], "", "")
        grid.add_row("observations/s", f"{s['observations_per_second']:.1f}",
                     "worker restarts", str(s["worker_restarts"]))
        if s["learned_numerics"]:  # pruned from here on, before they run
            grid.add_row("changes numerics", ", ".join(s["learned_numerics"]), "", "")
        return grid

    with Live(console=console, refresh_per_second=4) as live:
        tuner = tuner_class(inst, settings, on_trial=lambda t, _: live.update(table(t)))
        summary = tuner.run()
        live.update(table(tuner))
    console.print(f"results in {summary['output']}")
    return summary
