"""Readers of the contract: version 1 may gain fields, and old readers must keep working."""

from __future__ import annotations

import pytest

from evaluator import contract
from evaluator.contract import CaseResult, ContractError, ProblemResult, ProblemStatus, ResultFlag


def result_json(**extra) -> dict:
    result = ProblemResult(
        slug="all-reduce",
        status=ProblemStatus.PASSED,
        world_size=2,
        roofline=0.5,
        flags=["below_floor"],
        cases=[CaseResult(case="c", dtype="float32", passed=True, time_us=2.0, floor_us=1.0)],
    )
    return result.to_json() | extra


def test_a_result_reads_back_what_it_wrote():
    data = result_json()
    assert ProblemResult.from_json(data).to_json() == data


def test_readers_ignore_fields_they_do_not_know():
    data = result_json(energy_joules=3.5)
    data["cases"][0]["l2_hit_rate"] = 0.9
    result = ProblemResult.from_json(data)
    assert result.roofline == 0.5 and result.flags == ["below_floor"]
    assert result.cases[0] == CaseResult(
        case="c", dtype="float32", passed=True, time_us=2.0, floor_us=1.0
    )
    assert CaseResult.from_json({"case": "c", "dtype": "int32", "passed": False, "new": 1})


def test_a_missing_required_field_is_still_an_error():
    data = result_json()
    del data["status"]
    with pytest.raises(ContractError):
        ProblemResult.from_json(data)
    with pytest.raises(ContractError):
        ProblemResult.from_json(result_json(cases=[{"dtype": "float32"}]))


def test_speedups_with_their_intervals_and_rounds_read_back():
    data = result_json(speedup=1.84, speedup_low=1.80, speedup_high=1.88)
    data["cases"][0] |= {
        "speedup": 1.84,
        "speedup_low": 1.80,
        "speedup_high": 1.88,
        "rounds": [{"reference_us": 3.68, "candidate_us": 2.0}],
    }
    result = ProblemResult.from_json(data)
    assert (result.speedup_low, result.speedup_high) == (1.80, 1.88)
    assert result.cases[0].rounds == [{"reference_us": 3.68, "candidate_us": 2.0}]
    assert result.to_json() == data
    assert ResultFlag.CLOCK_MISMATCH == "clock_mismatch"


def test_a_result_written_before_the_rounds_reads_with_them_empty():
    data = result_json()
    for key in ("speedup_low", "speedup_high"):
        del data[key]
    for key in ("speedup", "speedup_low", "speedup_high", "rounds"):
        del data["cases"][0][key]
    result = ProblemResult.from_json(data)
    assert result.speedup_low is None and result.speedup_high is None
    assert result.cases[0].speedup is None and result.cases[0].rounds == []


def test_messages_and_logs_leave_as_plain_text():
    """Bundle code's text (an exception's message, its log) reaches pages and terminals:
    escapes and control characters are neutralised, newlines and tabs kept."""
    hostile = "\x1b[2J\x1b]0;pwned\x07boom\r\n\tat line 3\x9b31m"
    result = ProblemResult(
        slug="all-reduce",
        status=ProblemStatus.RUNTIME_ERROR,
        world_size=2,
        message=hostile,
        log=hostile,
    )
    data = result.to_json()
    for text in (data["message"], data["log"]):
        assert "\x1b" not in text and "\x07" not in text and "\r" not in text
        assert "\x9b" not in text and "boom\n\tat line 3" in text


def test_a_request_without_a_mode_is_a_ranked_run():
    request = contract.EvaluationRequest.build(
        evaluation_id="e",
        submission_id=1,
        profile="cpu",
        bundle_name="b.zip",
        bundle=b"zip",
        problems=["all-reduce"],
        mode=contract.Mode.PROFILE,
        profile_case="n=64",
    )
    data = request.to_json()
    again = contract.EvaluationRequest.from_json(data)
    assert (again.mode, again.profile_case) == ("profile", "n=64")
    del data["mode"], data["profile_case"]
    assert contract.EvaluationRequest.from_json(data).mode == contract.Mode.RANKED
    with pytest.raises(contract.ContractError, match="bad field"):
        contract.EvaluationRequest.from_json({**data, "mode": "free"})


def test_artifacts_are_checked_before_anything_keeps_them():
    trace = contract.Artifact.build(
        name="rank0.trace.json", media_type="application/json", data=b"{}", note="rank 0\x1b[2J"
    )
    message = contract.finished_message(
        evaluation_id="e", outcome=contract.EvaluationOutcome.DONE, artifacts=[trace]
    )
    (back,) = contract.read_artifacts(message["artifacts"])
    assert back.data() == b"{}" and "\x1b" not in back.note
    assert contract.read_artifacts(None) == []
    good = trace.to_json()
    for bad, words in [
        ({**good, "name": "../../etc/passwd"}, "plain file name"),
        ({**good, "name": ".hidden"}, "plain file name"),
        ({**good, "media_type": "text/html"}, "media type"),
        ({**good, "data_b64": "A" * (contract.ARTIFACT_CAP_BYTES * 2)}, "over"),
    ]:
        with pytest.raises(contract.ContractError, match=words):
            contract.read_artifacts([bad])
    with pytest.raises(contract.ContractError, match="one name"):
        contract.read_artifacts([good, good])
    with pytest.raises(contract.ContractError, match="bad base64"):
        contract.Artifact.from_json({**good, "data_b64": "!!"}).data()
    big = contract.Artifact.build(
        name="big.txt", media_type="text/plain", data=b"x" * (contract.ARTIFACT_CAP_BYTES + 5)
    )
    assert big.truncated and len(big.data()) == contract.ARTIFACT_CAP_BYTES


def test_a_results_precheck_findings_read_back_and_older_results_have_none():
    finding = {"rule": "clock", "path": "a.py", "line": 3, "text": "reads a clock: time"}
    result = ProblemResult(slug="a", status=ProblemStatus.PASSED, world_size=2, review=[finding])
    assert ProblemResult.from_json(result.to_json()).review == [finding]
    older = {k: v for k, v in result.to_json().items() if k != "review"}
    assert ProblemResult.from_json(older).review == []


@pytest.mark.parametrize(
    "review",
    [{"rule": "x"}, ["clock"], [{"rule": "x", "path": "a.py", "line": "3", "text": "t"}]],
)
def test_a_malformed_review_is_a_contract_error(review):
    data = ProblemResult(slug="a", status=ProblemStatus.PASSED, world_size=2).to_json()
    with pytest.raises(ContractError, match="review"):
        ProblemResult.from_json({**data, "review": review})
