"""The benches' shared statistics: the paired bootstrap separates a real difference from noise."""

import numpy as np
import pytest

from bench.common import paired_latency, paired_wer, pct


def test_paired_wer_separates_a_real_difference_from_noise() -> None:
    rng = np.random.default_rng(1)
    words = rng.integers(5, 30, size=300)
    base = rng.binomial(words, 0.06)
    worse = base + rng.binomial(words, 0.04)  # four more errors per hundred words
    real = paired_wer(worse, base, words)
    assert real.distinguishable and real.low > 0 and real.diff > 2
    # Another draw of the same system: the interval holds zero about 95 % of the time.
    held = [not paired_wer(rng.binomial(words, 0.06), base, words, rounds=500).distinguishable
            for _ in range(40)]
    assert sum(held) >= 34
    assert paired_wer(base, base, words).diff == 0.0


def test_paired_wer_refuses_unpaired_lists() -> None:
    with pytest.raises(ValueError):
        paired_wer([1, 2], [1], [5, 5])


def test_percentiles_and_latency_difference() -> None:
    assert pct([]) == {"p50": None, "p95": None, "n": 0}
    assert pct([1.0, 2.0, 3.0])["p50"] == 2.0
    diff, low, high = paired_latency([x + 100 for x in range(50)], list(range(50)))
    assert diff == 100.0 and low == high == 100.0
