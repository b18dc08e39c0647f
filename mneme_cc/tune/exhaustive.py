"""The exhaustive sampler: every combination of a discrete space, queued in
the study once, so that several processes share the queue."""

from __future__ import annotations

import itertools
import json
from typing import Any


def _params_key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def queue_combinations(study, space, trials: int) -> int:
    """The first `trials` combinations, queued once (a process that joins or
    resumes queues only those not in the study yet); how many there are."""
    combos = list(itertools.islice(space.combinations(), trials))
    seen = {_params_key(t.system_attrs.get("fixed_params", t.params))
            for t in study.get_trials(deepcopy=False) if "cancelled" not in t.user_attrs}
    for params in combos:
        if _params_key(params) not in seen:
            study.enqueue_trial(params)
    return len(combos)


def is_queued(storage, study_id: int, trial) -> bool:
    """Whether the trial is an enqueued combination, not a sampled one."""
    trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)
    return "fixed_params" in storage.get_trial_system_attrs(trial_id)
