"""asv benchmarks of small calls: argument handling against ``np.cbrt``'s call.

The cases of ``cbrtgrad bench --calls`` (:mod:`cbrtgrad.cli.bench.calls`): the
api's functions and the graph engine's step on one float64 element against
``np.cbrt`` on one, and ``cbrt`` on 1,000 against the ``cpu`` backend's own
ufunc, each a ratio timed in turns with its anchor (``best_times``).
Issue 33's goals: 2x, 2x for ``out=`` too, 1.2x on 1,000, 20x the engine.
"""

import numpy as np

from cbrtgrad.cli.bench import calls
from cbrtgrad.cli.bench.timing import best_times

ONE = np.ones(1)
G = np.full(1, 3.0)
OUT = np.empty(1)
MANY = np.linspace(-1e3, 1e3, 1000)
CASES = {case: (key, call) for case, key, call in calls._cases(ONE, G, OUT, MANY)}


class SmallCalls:
    """One call of each case; its ratio to the anchor of its row."""

    params = [list(CASES)]
    param_names = ["case"]

    def setup(self, case):
        key, self.call = CASES[case]
        self.anchor = calls.anchor_calls(ONE, MANY)[key]
        self.call()  # compile or load the kernels before timing

    def time_call(self, case):
        self.call()

    def track_ratio_to_anchor(self, case):
        ours, anchor = best_times([self.call, self.anchor], 5)
        return ours / anchor

    track_ratio_to_anchor.unit = "x"
