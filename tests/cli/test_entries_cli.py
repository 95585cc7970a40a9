"""`pkb entry register|status` and `pkb submit --entry NAME --samples DIR` against a live site."""

from __future__ import annotations

import json
import zipfile

import pytest

from portal.cli import main as cli
from portal.cli.commands import common
from portal.entries.models import Entry, EntrySample
from portal.submissions.models import Submission
from tests.portal.bundles import SOLUTION, solving
from tests.portal.judging import finish, passed

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _catalog(problems):
    """The published problems the samples solve."""


@pytest.fixture(autouse=True)
def _room_for_batches(settings):
    """Each sample takes one of the team's runs at once: room for batches of three."""
    settings.PKB_MAX_ACTIVE_SUBMISSIONS = 10


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def register(capsys, n: int = 3, k: int = 2) -> tuple[int, str, str]:
    return run(
        capsys,
        "entry", "register", "Claude Kernels", "--kind", "model", "--model", "claude",
        "--model-version", "4.5", "--sampling", "temperature=1", "--samples", str(n),
        "--k", str(k), "--date", "2026-11-20",
    )  # fmt: skip


def samples_dir(tmp_path, count: int, *, slugs=("all-reduce",), as_zip: bool = False):
    """DIR with sample_1 ... sample_<count>: bundle folders, or .zip archives."""
    folder = tmp_path / "samples"
    folder.mkdir()
    for i in range(1, count + 1):
        if as_zip:
            (folder / f"sample_{i}.zip").write_bytes(solving(*slugs))
            continue
        sample = folder / f"sample_{i}"
        sample.mkdir()
        for slug in slugs:
            (sample / f"{slug}.py").write_text(SOLUTION)
        (sample / "__pycache__").mkdir()
        (sample / "__pycache__" / "junk.pyc").write_bytes(b"\0")
    (folder / "README.txt").write_text("not a sample")
    return folder


def test_register_declares_n_and_k(capsys, as_alice, problems):
    code, _, err = register(capsys)
    assert code == 0, err
    assert "Registered model entry claude-kernels for Alice's Kernels: n=3, k=2" in err
    entry = Entry.objects.get()
    assert (entry.model_version, entry.sampling, str(entry.evaluated_on)) == (
        "4.5",
        "temperature=1",
        "2026-11-20",
    )


def test_register_refuses_k_above_n(capsys, as_alice, problems):
    code, _, err = register(capsys, n=2, k=3)
    assert code == 3 and "pass@k is estimated from n >= k samples" in err


def test_submit_sends_the_folders_as_one_batch_and_prints_json(capsys, as_alice, tmp_path):
    register(capsys)
    code, out, err = run(
        capsys,
        "submit", "--entry", "claude-kernels", "--samples",
        str(samples_dir(tmp_path, 3, slugs=("all-reduce", "all-gather"))), "--json",
    )  # fmt: skip
    assert code == 0, err
    batch = json.loads(out)
    assert [s["number"] for s in batch["samples"]] == [1, 2, 3]
    assert "3 sample(s), 6 attempt(s) queued" in err
    stored = Submission.objects.get(entry_sample__number=1)
    with zipfile.ZipFile(stored.bundle.open("rb")) as archive:
        assert sorted(archive.namelist()) == ["all-gather.py", "all-reduce.py"]


def test_submit_takes_zipped_samples_too(capsys, as_alice, tmp_path):
    register(capsys)
    code, _, err = run(
        capsys, "submit", "--entry", "claude-kernels", "--samples",
        str(samples_dir(tmp_path, 2, as_zip=True)),
    )  # fmt: skip
    assert code == 0, err
    assert EntrySample.objects.count() == 2


def test_extra_samples_are_refused_with_the_sites_reason(capsys, as_alice, tmp_path):
    register(capsys)
    folder = samples_dir(tmp_path, 2, as_zip=True)
    run(capsys, "submit", "--entry", "claude-kernels", "--samples", str(folder))
    code, _, err = run(capsys, "submit", "--entry", "claude-kernels", "--samples", str(folder))
    assert code == 3
    assert "declared 3 samples per problem" in err and "Nothing of the batch was kept" in err
    assert EntrySample.objects.count() == 2


def test_a_folder_without_samples_is_a_usage_error(capsys, as_alice, tmp_path):
    code, _, err = run(capsys, "submit", "--entry", "x", "--samples", str(tmp_path))
    assert code == 2 and "holds no sample" in err


def test_status_json_follows_the_entry_for_a_harness(capsys, as_alice, alice, tmp_path):
    register(capsys)
    run(
        capsys, "submit", "--entry", "claude-kernels", "--samples",
        str(samples_dir(tmp_path, 2, as_zip=True)),
    )  # fmt: skip
    for sample in EntrySample.objects.select_related("submission"):
        assert finish(sample.submission.evaluation_id, passed("all-reduce", 1.5, 1.4, 1.6))
    code, out, _ = run(capsys, "entry", "status", "claude-kernels", "--json")
    assert code == 0
    status = json.loads(out)
    assert status["finished"] is True and status["counts"]["done"] == 2
    (problem,) = status["scores"]["problems"]
    assert (problem["n"], problem["c"], problem["pass_at_k"]) == (2, 2, 1.0)
    code, out, _ = run(capsys, "entry", "status", "claude-kernels")
    assert "2 sample(s): 2 done (finished)" in out and "pass@2" in out


def test_submit_wait_follows_the_batch_until_it_is_judged(capsys, as_alice, tmp_path, monkeypatch):
    register(capsys)

    def judge_everything(_seconds: float) -> None:
        for sample in EntrySample.objects.select_related("submission"):
            finish(sample.submission.evaluation_id, passed("all-reduce"))

    monkeypatch.setattr(common, "sleep", judge_everything)
    code, out, err = run(
        capsys, "submit", "--entry", "claude-kernels", "--wait", "--samples",
        str(samples_dir(tmp_path, 2, as_zip=True)),
    )  # fmt: skip
    assert code == 0, err
    assert "2 sample(s): 2 done (finished)" in err
    assert "all-reduce" in out


def test_the_leaderboard_filters_whose_rows(capsys, as_alice, tmp_path):
    register(capsys)
    run(
        capsys, "submit", "--entry", "claude-kernels", "--samples",
        str(samples_dir(tmp_path, 1, as_zip=True)),
    )  # fmt: skip
    sample = EntrySample.objects.select_related("submission").get()
    finish(sample.submission.evaluation_id, passed("all-reduce"))
    code, out, _ = run(capsys, "leaderboard", "--who", "models")
    assert code == 0 and "Claude Kernels [model]" in out
    code, out, _ = run(capsys, "leaderboard", "--who", "people")
    assert "Claude Kernels" not in out
