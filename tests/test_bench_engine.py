"""``cbrtgrad bench --engine``: the rows' structure (the figures are checked by benchmarks)."""

import pytest

from cbrtgrad.cli.bench.engine import engine_rows


def test_engine_rows_structure():
    rows = engine_rows(repeat=1)
    assert len(rows) >= 2
    for row in rows:
        assert set(row) == {"case", "cbrtgrad_s", "anchor", "anchor_s", "ratio"}
        assert row["cbrtgrad_s"] > 0 and row["anchor_s"] > 0
        assert row["ratio"] == pytest.approx(row["cbrtgrad_s"] / row["anchor_s"])


def test_engine_rows_rejects_bad_repeat():
    with pytest.raises(ValueError, match="repeat must be an int >= 1"):
        engine_rows(repeat=0)
