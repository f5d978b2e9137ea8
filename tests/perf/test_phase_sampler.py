"""The per-phase RSS sampler attributes an allocation to the phase that made it and never
lowers the process peak the benchmark reports."""

from __future__ import annotations

import numpy as np
import pytest
from graphroute.core.apps.perf import perf
from graphroute.core.lib.phases import enter_phase, observe_phases


def test_a_phase_gets_its_own_peak_and_the_process_peak_survives_the_resets() -> None:
    sampler = perf.PhaseSampler()
    if not sampler.exact:
        pytest.skip("this kernel does not let a process reset its RSS high-water mark")
    with observe_phases(sampler):
        enter_phase("big")
        block = np.ones(40_000_000, dtype=np.float64)  # 320 MB, touched
        del block
        enter_phase("small")
        small = np.ones(1_000_000, dtype=np.float64)  # 8 MB
        del small
    result = sampler.finish()
    big, small_phase = result["phases"]["big"], result["phases"]["small"]
    assert big["above_entry_mb"] >= 250
    assert small_phase["above_entry_mb"] < 100  # the big block's peak is not carried over
    assert big["entries"] == 1 and small_phase["entries"] == 1
    # the resets lowered the kernel's counter; the reported process peak did not drop
    assert perf.peak_rss_mb() >= big["peak_mb"]


def test_no_observer_no_effect() -> None:
    seen: list[str] = []
    with observe_phases(seen.append):
        enter_phase("x")
        enter_phase("y")
    enter_phase("z")  # outside the block: nobody is told
    assert seen == ["x", "y"]


def test_without_resets_the_kernel_keeps_the_whole_peak() -> None:
    """``reset=False`` (scale-query --no-phase-peaks): the kernel's own peak, which
    /usr/bin/time -v reads, still holds the first phase's block when the last phase ends."""
    import resource

    sampler = perf.PhaseSampler(reset=False)
    with observe_phases(sampler):
        enter_phase("big")
        block = np.ones(40_000_000, dtype=np.float64)  # 320 MB, touched
        del block
        enter_phase("small")
    result = sampler.finish()
    assert not result["exact"]
    # the sampler reports MB to one decimal: compare the kernel's figure at the same rounding
    kernel_peak_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)
    assert kernel_peak_mb >= result["phases"]["big"]["peak_mb"] >= 300
