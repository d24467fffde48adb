"""The one timer, the one table formatter and the one progress bar of the measuring tools."""

import io
import time

import pytest

from cbrtgrad.cli.bench import timing
from cbrtgrad.verification import progress as _progress
from cbrtgrad.verification import text as _text


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _count(steps, stream, **kwargs):
    with _progress.bar(steps, stream=stream, **kwargs) as advance:
        for _ in range(steps):
            advance(1)
    return stream.getvalue()


def test_progress_off_a_terminal_is_one_final_line(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    text = _count(50, io.StringIO())
    assert text.count("\n") == 1 and "\r" not in text
    assert text.startswith("100.0%|") and "50/50" in text


def test_progress_under_ci_is_one_final_line_even_on_a_terminal(monkeypatch):
    monkeypatch.setenv("CI", "true")
    text = _count(50, _Terminal())
    assert text.count("\n") == 1 and "\r" not in text and "100.0%" in text


def test_progress_on_a_terminal_redraws_in_place(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    text = _count(3, _Terminal())
    assert "\r" in text and "100.0%" in text


def test_progress_disabled_writes_nothing(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert _count(5, io.StringIO(), enabled=False) == ""
    assert _count(5, _Terminal(), enabled=False) == ""


def test_best_time_is_per_call_and_setup_is_untimed():
    setups = []

    def setup():
        setups.append(1)
        time.sleep(0.01)

    seconds = timing.best_time(lambda: time.sleep(0.001), 3, number=2, setup=setup)
    assert 0.001 <= seconds < 0.005  # per call, and the 10 ms setup not in it
    assert len(setups) == 4  # the warm-up measurement, then three


def test_best_time_autorange_reaches_the_measurement_length():
    calls = []
    seconds = timing.best_time(lambda: calls.append(1), 2)
    # autorange's counts 1, 2, 5, 10, ...: as many calls as last a measurement.
    assert len(calls) > 10 and 0 < seconds < timing.MEASUREMENT_SECONDS


@pytest.mark.parametrize("repeat", [1, 4])
def test_best_time_makes_repeat_measurements(repeat):
    setups = []
    timing.best_time(lambda: None, repeat, number=1, setup=lambda: setups.append(1))
    assert len(setups) == repeat + 1


def test_table_aligns_text_left_and_numbers_right():
    text = _text.table(
        ("a", "value", "note"), [("x", 1.25, "ok"), ("long", "-", "")], ("", ".1f", "")
    )
    head, rule, first, second = text.splitlines()
    assert head == "a     value  note" and rule == "-" * len(head)
    assert first == "x       1.2  ok"  # format(1.25, ".1f"): round half to even
    assert second == "long      -"  # no trailing spaces


def test_best_time_measures_with_the_garbage_collector_on():
    import gc

    seen = []
    timing.best_time(lambda: seen.append(gc.isenabled()), 2, number=1)
    assert seen and all(seen)


def test_best_times_measures_in_turns_and_per_call():
    order = []

    def slow():
        order.append("slow")
        time.sleep(2 * timing.MEASUREMENT_SECONDS)

    def fast():
        order.append("fast")

    slow_s, fast_s = timing.best_times([slow, fast], 3)
    # per call (autorange: one call lasts a measurement)
    assert 2 * timing.MEASUREMENT_SECONDS <= slow_s < 10 * timing.MEASUREMENT_SECONDS
    assert 0 < fast_s < slow_s / 10
    # autorange for each in order, then three rounds, each: slow's call, then fast's many.
    measured = order[order.index("fast") :]
    rounds = [i for i, name in enumerate(measured) if name == "slow"]
    assert len(rounds) >= 3
    ends = rounds[-2:] + [len(measured)]
    between = [measured[a + 1 : b] for a, b in zip(rounds[-3:], ends, strict=True)]
    assert all(part and set(part) == {"fast"} for part in between)


def test_best_times_measures_with_the_garbage_collector_on():
    import gc

    seen = []
    timing.best_times([lambda: seen.append(gc.isenabled())], 2)
    assert seen and all(seen)


@pytest.mark.parametrize(
    ("functions", "repeat", "error", "match"),
    [
        ([], 3, ValueError, "functions: expected at least one callable"),
        ([lambda: None, 3], 3, TypeError, r"functions\[1\]: expected a callable, got int"),
        ([lambda: None], 0, ValueError, "repeat: expected an integer >= 1, got 0"),
        ([lambda: None], 2.0, ValueError, "repeat: expected an integer >= 1, got 2.0"),
        ([lambda: None], True, ValueError, "repeat: expected an integer >= 1, got True"),
    ],
)
def test_best_times_rejects_bad_arguments(functions, repeat, error, match):
    with pytest.raises(error, match=match):
        timing.best_times(functions, repeat)


def test_a_fresh_interpreter_runs_this_processs_cbrtgrad(monkeypatch, tmp_path):
    # measure.py startup and asv time the cbrtgrad that measures, also where it
    # is not the installed one (a checkout, a worktree).
    import cbrtgrad
    from tools.measuring import startup

    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.chdir(tmp_path)  # `python -c` would find a cbrtgrad in the working folder
    script = "import json, cbrtgrad; print(json.dumps({'file': cbrtgrad.__file__}))"
    assert startup.run_fresh(script, str(tmp_path)) == {"file": cbrtgrad.__file__}
