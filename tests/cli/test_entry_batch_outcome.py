"""`pkb submit --entry NAME --wait` exits as `pkb submit --wait` does: 1 when a problem
failed in any sample (issue 40)."""

from __future__ import annotations

import pytest

from portal.cli.commands import common
from portal.entries.models import EntrySample
from tests.cli.test_entries_cli import _catalog, _room_for_batches, register, run, samples_dir
from tests.portal.entries.helpers import wrong
from tests.portal.judging import finish, passed

__all__ = ["_catalog", "_room_for_batches"]  # the autouse fixtures, for these tests too

pytestmark = pytest.mark.django_db(transaction=True)


def waited(capsys, monkeypatch, tmp_path, *outcomes) -> tuple[int, str]:
    """Sends one sample per outcome and waits: the host's findings arrive as pkb polls."""
    register(capsys)

    def judge_everything(_seconds: float) -> None:
        samples = EntrySample.objects.select_related("submission").order_by("number")
        for sample, outcome in zip(samples, outcomes, strict=True):
            finish(sample.submission.evaluation_id, outcome)

    monkeypatch.setattr(common, "sleep", judge_everything)
    code, _, err = run(
        capsys, "submit", "--entry", "claude-kernels", "--wait", "--samples",
        str(samples_dir(tmp_path, len(outcomes), as_zip=True)),
    )  # fmt: skip
    return code, err


def test_a_wrong_answer_in_one_sample_exits_1(capsys, as_alice, tmp_path, monkeypatch):
    code, err = waited(capsys, monkeypatch, tmp_path, passed("all-reduce"), wrong("all-reduce"))
    assert "2 sample(s): 2 done (finished)" in err
    assert code == 1


def test_every_sample_passing_exits_0(capsys, as_alice, tmp_path, monkeypatch):
    code, err = waited(capsys, monkeypatch, tmp_path, passed("all-reduce"), passed("all-reduce"))
    assert code == 0, err
