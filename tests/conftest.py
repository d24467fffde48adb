"""Test-session set-up shared by every test module.

NOTE: CUDA kernels are tested under numba's CUDA simulator on machines without
a GPU. The variable must be set before anything imports ``numba.cuda``; a
machine with a GPU can run the real thing with ``NUMBA_ENABLE_CUDASIM=0``.

Hypothesis profiles: ``ci`` (chosen when ``CI`` is set) is derandomized, so a
CI failure replays on any machine; ``dev`` draws fresh examples each run.
Neither has a deadline: the machines are shared and the first call of a
kernel compiles it. ``HYPOTHESIS_PROFILE`` picks one explicitly.
"""

import os

from hypothesis import HealthCheck, settings

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("ci", derandomize=True, deadline=None, suppress_health_check=_QUIET)
settings.register_profile("dev", deadline=None, suppress_health_check=_QUIET)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
