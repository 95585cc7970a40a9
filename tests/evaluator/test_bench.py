"""`python -m evaluator.tools.bench --spread`: the repeatability table over runs' JSON reports,
of this evaluator or of the former one (which wrote no `speedup` per case)."""

from __future__ import annotations

import json

from evaluator.tools import bench


def report(speedups: list[float], wall_s: float, *, former: bool = False) -> dict:
    cases = []
    for name, time_us, speedup in zip(("big", "small"), (400.0, 50.0), speedups, strict=True):
        case = {"case": name, "dtype": "bfloat16", "time_us": time_us}
        if former:
            case["ref_time_us"] = time_us * speedup
        else:
            case |= {"speedup": speedup, "speedup_low": speedup * 0.99, "speedup_high": speedup}
        cases.append(case)
    return {"results": [{"slug": "all-reduce", "cases": cases}], "evaluator_wall_s": wall_s}


def test_the_spread_is_judged_against_the_limit_of_the_case_time(tmp_path):
    runs = [report([2.0, 1.0], 30.0), report([2.03, 1.04], 31.0), report([2.01, 1.02], 29.5)]
    table = bench.spread_table(runs)
    big, small = (line for line in table.splitlines() if line.startswith("| all-reduce"))
    # 400 us: 2.03 / 2.0 is a 1.5% spread, within 2%; 50 us: 4%, within 5%.
    assert "| 1.5% | 2% | yes |" in big and "2.00x (1.98-2.00)" in big
    assert "| 4.0% | 5% | yes |" in small
    assert "Evaluator wall time per run: 30.0 s, 31.0 s, 29.5 s." in table


def test_former_reports_count_by_their_times_and_a_wide_spread_fails(tmp_path):
    paths = []
    for i, speedups in enumerate(([2.0, 1.0], [1.8, 1.0])):
        path = tmp_path / f"run-{i}.json"
        path.write_text(json.dumps(report(speedups, 10.0, former=True)))
        paths.append(str(path))
    out = tmp_path / "spread.md"
    assert bench.main(["--spread", *paths, "--md", str(out)]) == 0
    big = next(line for line in out.read_text().splitlines() if "| big (" in line)
    assert "| 2.00x | 1.80x | 11.1% | 2% | NO |" in big
