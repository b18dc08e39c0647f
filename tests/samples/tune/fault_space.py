"""A search space over examples/fault_injection whose points fail on purpose,
one per outcome (tests/tune/test_gpu_tune.py)."""

from mneme_cc.tune.space import Categorical, SearchSpace

CASES = {
    "ok": {},                                                # verified
    "wrong_grid": {"grid": (1, 1, 1)},                       # failed_verification
    "bad_pipeline": {"pipeline": "sroa,no-such-pass"},       # compile_error
    "too_many_threads": {"block": (2048, 1, 1)},             # infeasible: pruned
    "huge_shared": {"shared_mem_bytes": 1 << 20},            # invalid_launch
    "illegal_address": {"block": (96, 1, 1)},                # runtime_error
    "hang": {"block": (64, 1, 1)},                           # timeout
}


class Faults(SearchSpace):
    def dimensions(self):
        return [Categorical("case", tuple(CASES))]

    def fields(self, params):
        return CASES[params["case"]]
