from __future__ import annotations

import pytest

from tests.problems import harness


def test_a_rank_that_raises_fails_the_run_with_its_exit_code(tmp_path):
    # The ranks raise KeyError for an unknown problem; the harness must say so at once
    # instead of waiting for results that will never come.
    with pytest.raises(AssertionError, match=r"exit codes \[1"):
        harness.run_references(["no-such-problem"], 2, tmp_path)
