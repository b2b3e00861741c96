"""``taskforge bench corpus``: the pure parts (reading a run back, twins, gaps, table, resume) and the
CPU-capped process tree, without the network."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from taskforge.bench.corpus import load_corpus, load_plain, read_result, result_path, run_corpus
from taskforge.bench.corpus_report import (
    PackageResult,
    collect,
    distinct_entities,
    first_error_line,
    longest_gaps,
    render_markdown,
    targets,
    task_verdicts,
)
from taskforge.bench.corpus_tree import run_tree
from taskforge.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def test_twins_count_once_and_order_of_entities_does_not_matter() -> None:
    assert distinct_entities([["m.f"], ["m.f"], ["m.g"], ["m.a", "m.b"], ["m.b", "m.a"]]) == 3
    assert distinct_entities([]) == 0


def test_longest_gap_covers_profiling_and_the_end_of_a_killed_run() -> None:
    # profiling 50 s, verdicts at 50, 55, 130, then killed at 150
    assert longest_gaps(1000.0, [1050.0, 1055.0, 1130.0], 1150.0) == (75.0, 75.0)
    # profiling is the longest stretch; after the first verdict only 20 s
    assert longest_gaps(0.0, [90.0, 100.0], 120.0) == (90.0, 20.0)
    # nothing decided: the whole run is one gap, and there is no "after the first"
    assert longest_gaps(0.0, [], 42.0) == (42.0, None)


def test_first_error_line_prefers_taskforge_error_line_then_traceback() -> None:
    assert first_error_line("settings: {}\nerror: pypi:x: cannot fetch sdist\nmore") == \
        "error: pypi:x: cannot fetch sdist"
    tb = 'Traceback (most recent call last):\n  File "a.py", line 1, in <module>\n    x()\nKeyError: \'k\'\n'
    assert first_error_line(tb) == "KeyError: 'k'"
    assert first_error_line("all fine\n") == ""


def _task_row(iid: str, strategy: str, entities: list[str]) -> dict:
    return {"instance_id": iid, "strategy": strategy, "entities": entities}


def _fake_run(tmp: Path, start: float) -> tuple[Path, Path]:
    """A dataset with a journal (3 decisions) and a work area with the package's profile."""
    dataset, work = tmp / "dataset", tmp / "work"
    journal = dataset / ".journal" / "pkg-1.0"
    journal.mkdir(parents=True)
    entries = [
        (10.0, {"candidate_id": "a", "task": _task_row("pkg__stub__f", "stub", ["pkg.f"]), "test_seconds": 4.0}),
        (20.0, {"candidate_id": "b", "task": _task_row("pkg__delete__f", "delete", ["pkg.f"]), "test_seconds": 4.0}),
        (95.0, {"candidate_id": "c", "task": None, "test_seconds": 2.0,
                "rejected": {"candidate_id": "c", "reason": "import_broken", "detail": ""}}),
    ]
    for i, (at, entry) in enumerate(entries):
        p = journal / f"{i}.json"
        p.write_text(json.dumps(entry))
        os.utime(p, (start + at, start + at))
    prof = work / "profiles" / "abc"
    prof.mkdir(parents=True)
    (prof / "profile.json").write_text(json.dumps({"snapshot": {"name": "Pkg_Name", "version": "1.0"}}))
    (prof / "baseline.json").write_text(json.dumps({
        "passed": ["t1", "t2", "t3"], "flaky": ["t4"], "failed": [], "skipped": ["t5"],
        "collection_errors": ["tests/bad.py"], "run_seconds": [9.0, 2.0, 2.0]}))
    return dataset, work


def test_collect_reads_a_capped_run_back_from_its_journal_and_profile(tmp_path: Path) -> None:
    start = 1_700_000_000.0
    dataset, work = _fake_run(tmp_path, start)
    written = [_task_row("pkg__stub__f", "stub", ["pkg.f"])]
    r = collect("pkg-name", "1.0", dataset=dataset, work=work, log_text="settings: ...\n", start=start,
                end=start + 120, status="cpu_cap", rc=None, cpu_s=240.0, written=written,
                validate={"status": "ok", "holding": 1, "broken": []}, plain_passed=3, size="large")
    assert (r.baseline_passed, r.baseline_total, r.baseline_flaky, r.collection_errors) == (3, 5, 1, 1)
    assert r.pass_match and r.suite_s == 2.0
    assert (r.decided, r.accepted, r.accepted_distinct) == (3, 2, 1)  # the stub/delete twins of pkg.f
    assert r.funnel == {"import_broken": 1} and r.funnel_from == "journal"
    assert r.candidates is None  # generate never printed its summary
    assert (r.first_decision_s, r.longest_gap_s, r.gap_after_first_s) == (10.0, 75.0, 75.0)
    assert r.suite_eq_per_task == 2.5  # 10 s of test time / 2 s suite / 2 accepted
    assert (r.holds, r.validated_distinct, r.tasks_by_strategy) == (1, 1, {"stub": 1})
    assert r.cpu_min == 4.0 and r.error == ""
    assert PackageResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_collect_takes_candidates_funnel_and_error_from_generate_summary(tmp_path: Path) -> None:
    summary = {"tasks": 0, "sources": [{"source": "pypi:x==1", "error": "cannot fetch sdist of x==1\nsecond line",
                                        "candidates": 0, "funnel": {}}]}
    log = "settings: {}\nerror: pypi:x==1: cannot fetch sdist of x==1\n" + json.dumps(summary) + "\n"
    r = collect("x", "1", dataset=tmp_path / "none", work=tmp_path / "none", log_text=log, start=0.0, end=3.0,
                status="failed", rc=1, cpu_s=1.2, written=[])
    assert r.status == "failed" and r.error == "cannot fetch sdist of x==1"
    assert r.candidates == 0 and r.funnel_from == "summary" and r.baseline_passed is None
    assert r.longest_gap_s == 3.0 and r.validated_distinct == 0 and r.validate_status == "skipped"


def test_broken_tasks_do_not_count_as_validated(tmp_path: Path) -> None:
    written = [_task_row(f"t{i}", "stub", [f"m.f{i}"]) for i in range(3)]
    r = collect("x", "1", dataset=tmp_path, work=tmp_path, log_text="", start=0.0, end=1.0, status="ok", rc=0,
                cpu_s=1.0, written=written, validate={"status": "broken", "holding": 2, "broken": ["t1"]})
    assert (r.holds, r.validated_distinct) == (2, 2)


def test_a_validation_cut_at_its_cap_counts_the_verdicts_it_printed(tmp_path: Path) -> None:
    """networkx 3.6.1: 7 tasks accepted, `taskforge validate` killed at its CPU cap before its summary line: the
    row said 0 validated though it had graded some. Each task's verdict is a JSON line as soon as it is known."""
    log = ("[1/4] t0: holds\n" + json.dumps({"instance_id": "t0", "holds": True, "gold": 1.0, "empty": 0.0}) + "\n"
           + json.dumps({"instance_id": "t1", "holds": False, "gold": 0.0, "empty": 0.0}) + "\n"
           + json.dumps({"instance_id": "t2", "holds": True, "gold": 1.0, "empty": 0.0}) + "\n")
    v = task_verdicts(log)
    assert v == {"holding": 2, "held": ["t0", "t2"], "broken": ["t1"], "partial": True}
    assert task_verdicts("no verdict yet\n") == {}
    written = [_task_row(f"t{i}", "stub", [f"m.f{i}"]) for i in range(4)]
    r = collect("x", "1", dataset=tmp_path, work=tmp_path, log_text="", start=0.0, end=1.0, status="ok", rc=0,
                cpu_s=1.0, written=written, validate={"status": "cpu_cap", **v})
    assert (r.holds, r.validated_distinct, r.validate_status) == (2, 2, "cpu_cap")  # t3 was never graded


def _row(name: str, version: str = "1.0", **kw) -> PackageResult:
    return PackageResult(name, version, **kw)


def test_targets_and_table() -> None:
    results = [
        _row("good", status="ok", plain_passed=10, baseline_passed=10, decided=20, accepted=12,
             validated_distinct=10, holds=12, tasks_written=12, suite_eq_per_task=1.0, gap_after_first_s=30.0,
             longest_gap_s=70.0, tasks_by_strategy={"stub": 7, "delete": 5}, funnel={"import_broken": 3}),
        _row("slow", status="cpu_cap", plain_passed=10, baseline_passed=9, decided=10, accepted=2,
             suite_eq_per_task=4.0, gap_after_first_s=200.0, longest_gap_s=200.0, error="cpu cap"),
        _row("bad", status="failed", error="cannot fetch sdist of bad==1.0 | `x`"),
    ]
    t = targets(results)
    assert (t["pass_match"], t["pass_match_of"], t["pass_match_pct"]) == (1, 2, 50.0)
    assert (t["yield_met"], t["yield_met_pct"]) == (1, 33.3)
    assert t["gap_over_60s"] == ["good", "slow"] and t["gap_after_first_over_60s"] == ["slow"]
    assert t["covered_to_task_share"] == round(14 / 30, 3)
    assert t["suite_eq_per_task"] == round((12 * 1.0 + 2 * 4.0) / 14, 2)
    md = render_markdown(results, {"label": "BEFORE", "command": "taskforge bench corpus", "budget_cpu_min": 4})
    assert md.startswith("# Corpus benchmark (BEFORE)")
    rows = [ln for ln in md.splitlines() if ln.startswith("| good") or ln.startswith("| bad")]
    assert "10/10 ✓" in rows[0] and "7/5/0" in rows[0] and "import_broken=3 (journal)" in rows[0]
    assert "| failed |" in rows[1]
    assert "cannot fetch" not in rows[1]  # errors go below the table, one line each
    assert "- bad (failed): `cannot fetch sdist of bad==1.0 | 'x'`" in md
    assert "pass count equals plain pytest: 1/2 = 50.0%" in md


def test_load_corpus_keeps_only_order_and_rejects_unknown_names(tmp_path: Path) -> None:
    lst = tmp_path / "c.toml"
    lst.write_text('[[package]]\nname = "a"\nversion = "1"\n\n[[package]]\nname = "B_c"\nversion = "2"\n')
    assert [p["name"] for p in load_corpus(lst)] == ["a", "B_c"]
    assert [p["name"] for p in load_corpus(lst, ("b-c", "a"))] == ["B_c", "a"]
    with pytest.raises(ConfigError, match="not in"):
        load_corpus(lst, ("zzz",))
    (tmp_path / "bad.toml").write_text('[[package]]\nname = "a"\n')
    with pytest.raises(ConfigError, match="needs a name and a version"):
        load_corpus(tmp_path / "bad.toml")


def test_committed_corpus_list_and_plain_counts_agree() -> None:
    packages = load_corpus(REPO / "datasets" / "corpus" / "packages.toml")
    plain = load_plain(REPO / "datasets" / "corpus" / "plain_pytest.json")
    assert len(packages) >= 25 and sum(p["size"] == "large" for p in packages) >= 5
    assert {p["name"].lower() for p in packages} <= set(plain)
    assert plain["inflection"] == 455


def test_resume_skips_packages_with_a_result_and_reruns_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "out"
    packages = [{"name": "done-pkg", "version": "1"}, {"name": "todo", "version": "2"}]
    kept = _row("done-pkg", status="ok", accepted=3)
    result_path(out, "done-pkg").parent.mkdir(parents=True)
    result_path(out, "done-pkg").write_text(json.dumps(kept.to_dict()))
    ran: list[str] = []

    def runner(pkg, _out, **_kw) -> PackageResult:
        ran.append(pkg["name"])
        if pkg["name"] == "todo":
            return _row("todo", version="2", status="failed", error="boom")
        return _row(pkg["name"])

    kw = dict(budget_cpu_min=1, wall_factor=2, validate_cpu_min=1, plain={}, json_out=tmp_path / "r.json",
              md_out=tmp_path / "r.md", meta={}, say=lambda _m: None, runner=runner)
    results = run_corpus(packages, out, resume=True, **kw)
    assert ran == ["todo"] and [r.name for r in results] == ["done-pkg", "todo"]
    assert read_result(out, "todo").error == "boom"  # written as soon as it finished
    body = json.loads((tmp_path / "r.json").read_text())
    assert [p["name"] for p in body["packages"]] == ["done-pkg", "todo"] and body["targets"]["ok"] == 1
    run_corpus(packages, out, resume=True, **kw)
    assert ran == ["todo"]  # both have results now
    run_corpus(packages, out, resume=False, **kw)
    assert ran == ["todo", "done-pkg", "todo"]


def test_stop_at_starts_no_new_package(tmp_path: Path) -> None:
    ran: list[str] = []
    results = run_corpus([{"name": "a", "version": "1"}], tmp_path, budget_cpu_min=1, wall_factor=2,
                         validate_cpu_min=1, plain={}, resume=False, json_out=tmp_path / "r.json",
                         md_out=tmp_path / "r.md", meta={}, stop_at=time.time() - 1, say=lambda _m: None,
                         runner=lambda pkg, *_a, **_k: ran.append(pkg["name"]))
    assert results == [] and ran == []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_cpu_cap_counts_grandchildren_and_kills_the_whole_tree(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    code = ("import subprocess, sys\n"
            "c = subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
            f"open({str(pids)!r}, 'w').write(str(c.pid))\n"
            "while True: pass\n")
    run = run_tree([sys.executable, "-c", code], cpu_cap_s=2.0, wall_cap_s=60, log=tmp_path / "log",
                   poll_s=0.2, grace_s=1.0)
    assert run.status == "cpu_cap" and run.rc is None
    assert 2.0 <= run.cpu_s < 8.0
    assert run.wall_s < 30  # two busy processes reach 2 CPU-s in about a second each, even on a loaded machine
    assert not _alive(int(pids.read_text()))


def test_wall_cap_and_a_detached_child_does_not_outlive_the_run(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # the child leaves the session (setsid) and outlives its parent, which exits normally
    code = ("import subprocess, sys, time\n"
            "c = subprocess.Popen(['sleep', '60'], start_new_session=True)\n"
            f"open({str(pids)!r}, 'w').write(str(c.pid))\n"
            "time.sleep(1.5)\n")
    run = run_tree([sys.executable, "-c", code], cpu_cap_s=60, wall_cap_s=60, log=tmp_path / "log", poll_s=0.2)
    assert run.status == "exited" and run.rc == 0 and run.leftovers == 1
    time.sleep(0.2)
    assert not _alive(int(pids.read_text()))
    run = run_tree(["sleep", "30"], cpu_cap_s=60, wall_cap_s=1.0, log=tmp_path / "log", poll_s=0.2, grace_s=1.0)
    assert run.status == "wall_cap" and run.wall_s < 10


def test_cpu_of_short_process_chains_is_counted_once(tmp_path: Path) -> None:
    # like a test run: root -> sh -> python, a chain that ends within one poll, many times over
    busy = tmp_path / "busy.py"
    busy.write_text("import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3:\n    pass\n")
    code = ("import subprocess, sys, resource\n"
            f"for _ in range(6): subprocess.run(['sh', '-c', sys.executable + ' {busy}; true'])\n"
            "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(u.ru_utime + u.ru_stime)\n")
    run = run_tree([sys.executable, "-c", code], cpu_cap_s=60, wall_cap_s=120, log=tmp_path / "log", poll_s=0.2)
    children = float((tmp_path / "log").read_text().split()[-1])
    assert run.status == "exited" and children >= 1.7
    assert children <= run.cpu_s <= children + 1.0  # the root's own start-up on top, never the chains twice


def test_pass_match_counts_the_tests_the_baseline_set_aside_as_flaky() -> None:
    # marshmallow: two parametrized ids carry datetime.now(), so each baseline run names them anew
    assert _row("m", plain_passed=1192, baseline_passed=1190, baseline_flaky=6).pass_match
    assert not _row("m", plain_passed=1192, baseline_passed=1190, baseline_flaky=1).pass_match
    assert not _row("m", plain_passed=1190, baseline_passed=1192, baseline_flaky=6).pass_match  # more than plain
    table = render_markdown([_row("m", plain_passed=1192, baseline_passed=1190, baseline_flaky=6)], {})
    assert "1190/1192 ✓ (6 flaky)" in table


def test_plain_reference_count_replaces_a_plain_run_that_ran_nothing() -> None:
    plain = load_plain(REPO / "datasets" / "corpus" / "plain_pytest.json")
    assert plain["markdown"] == 1210 and plain["decorator"] == 25  # notes say which command gave them


def test_task_key_counts_twins_once_and_bigger_tasks_apart() -> None:
    from taskforge.bench.corpus_report import distinct_tasks, task_key

    def task(strategy: str, entity: str, entities: list[str], stubbed: list[str] | None = None) -> dict:
        prov = {"candidate": {"strategy": strategy, "entity": entity}}
        return {"entities": entities, "provenance": {**prov, **({"stubbed_dependents": stubbed} if stubbed else {})}}

    stub = task("stub", "m.f", ["m.f"])
    delete = task("delete", "m.f", ["m.f", "m._helper"])  # the delete twin takes a private helper along
    bigger = task("delete", "m.f", ["m.f", "m.g"], stubbed=["m.g"])  # m.g stubbed too: more to implement
    klass = [task("stub", "m.C", ["m.C.a", "m.C.b"]), task("delete", "m.C", ["m.C", "m.C.a", "m.C.b"])]
    assert task_key(bigger) == ("m.f", "m.g")
    assert distinct_tasks([stub, delete, bigger, *klass]) == 3
    assert distinct_tasks([{"entities": ["m.b", "m.a"]}, {"entities": ["m.a", "m.b"]}]) == 1  # no provenance
    assert task_key({"key": ["m.f"], "entities": ["x"]}) == ("m.f",)  # a written record's key wins
    row = {"entities": ["m.f", "m.g"], "provenance": json.dumps(bigger["provenance"])}  # a journal's task row
    assert task_key(row) == ("m.f", "m.g")


def test_more_passes_than_plain_pytest_within_its_skips_count_as_at_least() -> None:
    """tabulate: 311 passes against plain's 303, which skipped 16 tests for optional dependencies its venv
    lacked: not equal, but at least plain's; more than its skips could explain is neither."""
    from taskforge.bench.corpus_report import PackageResult

    r = PackageResult("tabulate", "0.10.0", status="ok", plain_passed=303, baseline_passed=311, plain_skipped=16)
    assert not r.pass_match and r.pass_at_least and r.to_dict()["pass_at_least"]
    assert not PackageResult("x", "1", plain_passed=303, baseline_passed=330, plain_skipped=16).pass_at_least
    assert not PackageResult("x", "1", plain_passed=303, baseline_passed=300, plain_skipped=16).pass_at_least
    assert PackageResult("x", "1", plain_passed=303, baseline_passed=303, plain_skipped=0).pass_at_least


def test_the_baseline_numbers_come_from_the_main_profile_never_its_pure_variant(tmp_path: Path) -> None:
    """A source with a pure-Python variant has two profiles; its pass count is the main one's (the variant's
    environment runs without the compiled modules, so their tests skip)."""
    start = 1_700_000_000.0
    dataset, work = _fake_run(tmp_path, start)
    pure = work / "profiles" / "000-pure"  # sorts first
    pure.mkdir(parents=True)
    (pure / "profile.json").write_text(json.dumps({"snapshot": {"name": "Pkg_Name", "version": "1.0"},
                                                   "env": {"spec": {"compiled_extensions": False}}}))
    (pure / "baseline.json").write_text(json.dumps({"passed": ["t1"], "run_seconds": [1.0]}))
    r = collect("pkg-name", "1.0", dataset=dataset, work=work, log_text="", start=start, end=start + 120,
                status="ok", rc=0, cpu_s=60.0, written=[], plain_passed=3)
    assert r.baseline_passed == 3 and r.pass_match
