"""Several workers on one 8-GPU host, planned and checked on CPU with fake device sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.host.hostplan import PlanError, main, plan_host, write_env_files
from evaluator.host.settings import SettingsError, load_settings

EIGHT = range(8)
SECRET = {"PKB_SEED_SECRET": "hostplan-test-secret-0123"}


def _env_of(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def test_four_two_gpu_workers_split_the_host_without_sharing_anything():
    slots = plan_host(
        ["h200x2"] * 4, gpus=EIGHT, scratch_root=Path("/srv/scratch"), memory_mb=2_048_000
    )
    assert [s.devices for s in slots] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert len({s.name for s in slots}) == 4
    assert len({s.candidate_user for s in slots}) == 4
    assert len({s.scratch_dir for s in slots}) == 4
    assert slots[1].env() == {
        "PKB_PROFILE": "h200x2",
        "PKB_WORKER_NAME": "h200x2-1",
        "CUDA_VISIBLE_DEVICES": "2,3",
        "PKB_CANDIDATE_USER": "pkb-cand-1",
        "PKB_SCRATCH_DIR": "/srv/scratch/h200x2-1",
        # Two of eight GPUs: a quarter of three quarters of the host's 2 TB.
        "PKB_EVALUATION_MEMORY_MB": "384000",
    }


def test_two_four_gpu_workers_or_a_mix_fit_too():
    assert [s.devices for s in plan_host(["h200x4", "h200x4"], gpus=EIGHT)] == [
        (0, 1, 2, 3),
        (4, 5, 6, 7),
    ]
    mixed = plan_host(["h200x4", "h200x2", "h200x2"], gpus=[7, 6, 5, 4, 3, 2, 1, 0])
    assert [s.env()["CUDA_VISIBLE_DEVICES"] for s in mixed] == ["7,6,5,4", "3,2", "1,0"]


def test_a_plan_that_does_not_fit_is_refused():
    with pytest.raises(PlanError, match="need 10 GPUs; the host has 8"):
        plan_host(["h200x4", "h200x4", "h200x2"], gpus=EIGHT)
    with pytest.raises(PlanError, match="unknown hardware profile 'h100x8'"):
        plan_host(["h100x8"], gpus=EIGHT)
    with pytest.raises(PlanError, match="repeat"):
        plan_host(["h200x2"], gpus=[0, 0])


def test_cpu_workers_see_no_gpu():
    [slot] = plan_host(["cpu"], gpus=EIGHT)
    assert slot.devices == () and slot.env()["CUDA_VISIBLE_DEVICES"] == ""
    assert "PKB_EVALUATION_MEMORY_MB" not in slot.env()  # the settings' default: the host's


def test_each_written_env_file_is_what_the_worker_settings_read(tmp_path):
    slots = plan_host(["h200x2", "h200x2", "h200x4"], gpus=EIGHT, scratch_root=tmp_path / "s")
    paths = write_env_files(slots, tmp_path / "workers")
    assert [p.name for p in paths] == ["h200x2-0.env", "h200x2-1.env", "h200x4-2.env"]
    for slot, path in zip(slots, paths, strict=True):
        env = _env_of(path) | SECRET
        env.pop("PKB_CANDIDATE_USER")  # such users exist on the GPU host, not here
        settings = load_settings(env)
        assert (settings.profile, settings.worker_name) == (slot.profile, slot.name)
        assert settings.scratch_dir == slot.scratch_dir
        assert settings.evaluation_memory_bytes == slot.memory_mb << 20 > 0


@pytest.mark.parametrize("devices", ["4", ""])
def test_a_gpu_worker_pinned_to_too_few_gpus_refuses_to_start(devices):
    env = {"PKB_PROFILE": "h200x2", "CUDA_VISIBLE_DEVICES": devices} | SECRET
    with pytest.raises(SettingsError, match="needs 2"):
        load_settings(env)


def test_a_gpu_worker_pinned_to_its_gpus_or_not_pinned_starts():
    assert load_settings({"PKB_PROFILE": "h200x2", "CUDA_VISIBLE_DEVICES": "6,7"} | SECRET)
    # Its ranks take the first two it sees (a single-host check of a smaller profile).
    assert load_settings({"PKB_PROFILE": "h200x2", "CUDA_VISIBLE_DEVICES": "0,1,2,3"} | SECRET)
    assert load_settings({"PKB_PROFILE": "h200x8"} | SECRET).worker_name == "h200x8"


def test_a_worker_name_must_be_a_plain_word():
    with pytest.raises(SettingsError, match="PKB_WORKER_NAME"):
        load_settings({"PKB_WORKER_NAME": "a@b c"} | SECRET)


def test_the_command_writes_the_files_or_says_why_not(tmp_path, capsys):
    assert main(["--gpus", "8", "h200x4", "h200x4", "--out", str(tmp_path)]) == 0
    assert _env_of(tmp_path / "h200x4-1.env")["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"
    assert main(["--gpus", "4", "h200x4", "h200x2"]) == 2
    assert "need 6 GPUs; the host has 4" in capsys.readouterr().err
