"""Times read the same on the site and in pkb: scaled, the unit always written."""

from __future__ import annotations

import pytest

from portal.formats import duration_range_us, duration_us, file_size, quartiles


@pytest.mark.parametrize(
    ("us", "text"),
    [
        (0.04, "0.0 µs"),
        (84.24, "84.2 µs"),
        (999.94, "999.9 µs"),
        (999.96, "1.00 ms"),  # never "1000.0 µs"
        (1_840.0, "1.84 ms"),
        (999_996.0, "1.00 s"),
        (2_100_000.0, "2.10 s"),
        (None, "—"),
        ("", "—"),  # a key missing from an older case row
        (True, "—"),
    ],
)
def test_a_time_is_scaled_with_its_unit(us, text):
    assert duration_us(us) == text


def test_a_range_takes_the_unit_of_its_high_end():
    assert duration_range_us(83.1, 86.0) == "83.1–86.0 µs"
    assert duration_range_us(980.0, 1_020.0) == "0.98–1.02 ms"


def test_quartiles_as_the_judge_takes_them():
    assert quartiles([900.0, 980.0, 1000.0, 1020.0, 1500.0]) == (980.0, 1020.0)
    assert quartiles([5.0]) is None


@pytest.mark.parametrize(
    ("size", "text"),
    [(71, "71 bytes"), (2048, "2.0 KiB"), (8 * 1024 * 1024, "8.0 MiB"), (None, "—")],
)
def test_file_sizes_are_in_binary_units_as_the_artifact_cap_is_said(size, text):
    assert file_size(size) == text
