"""``taskforge generate`` / ``taskforge validate``: exit codes and one-line messages, end to end."""

from __future__ import annotations

import json

import pytest
import typer
from generate_fixtures import make_mini_project
from typer.testing import CliRunner

from taskforge.cli import generate_cmd, validate_cmd
from taskforge.dataset.reader import Dataset


def app() -> typer.Typer:
    a = typer.Typer(pretty_exceptions_enable=False)

    @a.callback()
    def _root() -> None:
        """Test app holding generate and validate."""

    generate_cmd.register(a)
    validate_cmd.register(a)
    return a


def _invoke(*args: str):
    return CliRunner().invoke(app(), list(args))


def test_bad_sources_each_get_one_line_and_exit_1(tmp_path):
    res = _invoke("generate", str(tmp_path / "missing"), "pypi:inflection", "--out", str(tmp_path / "out"),
                  "--work-dir", str(tmp_path / "work"))
    assert res.exit_code == 1
    errors = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 2, res.output
    assert "does not exist" in errors[0] and "expected pypi:NAME==VERSION" in errors[1]
    assert "Traceback" not in res.output


def test_unknown_strategy_is_one_line_before_any_work(tmp_path):
    res = _invoke("generate", str(tmp_path), "--out", str(tmp_path / "out"), "--strategies", "stub,shred",
                  "--work-dir", str(tmp_path / "work"))
    assert res.exit_code == 1
    assert "unknown strategies ['shred']" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "work" / "profiles").exists()


def test_validate_of_a_missing_dataset_is_one_line(tmp_path):
    res = _invoke("validate", str(tmp_path / "nothing"))
    assert res.exit_code == 1
    errors = [ln for ln in res.output.splitlines() if ln.startswith("error")]
    assert len(errors) == 1 and "does not exist" in errors[0], res.output
    assert "Traceback" not in res.output


@pytest.mark.slow
def test_a_bad_source_does_not_stop_the_good_one_and_validate_confirms(tmp_path):
    src = make_mini_project(tmp_path / "minipkg")
    out = tmp_path / "out"
    work = tmp_path / "work"
    res = _invoke("generate", str(tmp_path / "missing"), str(src), "--out", str(out), "--work-dir", str(work),
                  "--strategies", "stub,module", "--max-tasks", "2", "--runs", "2", "--json")
    assert res.exit_code == 1, res.output  # one source failed
    summary = json.loads(res.output.strip().splitlines()[-1])
    bad, good = summary["sources"]
    assert "does not exist" in bad["error"] and not good["error"]
    assert good["tasks"] == 2 and summary["tasks"] == 2
    assert len(Dataset.open(out).tasks()) == 2
    res = _invoke("validate", str(out), "--work-dir", str(work), "--json")
    assert res.exit_code == 0, res.output
    lines = [json.loads(ln) for ln in res.output.strip().splitlines() if ln.startswith("{")]
    verdict = lines[-1]
    assert verdict["tasks"] == 2 and verdict["holding"] == 2 and verdict["broken"] == []
    # each task's verdict was printed as soon as it was known (what a killed validation keeps)
    assert sorted(ln["instance_id"] for ln in lines[:-1]) == sorted(t.instance_id for t in Dataset.open(out).tasks())
    assert all(ln["holds"] for ln in lines[:-1])


def test_validate_grades_the_empty_patch_on_the_fail_to_pass_tests_alone(tmp_path, monkeypatch):
    """The PASS_TO_PASS tests decide nothing about the empty patch (it must score 0 with no FAIL_TO_PASS test
    passing); cattrs' 929 of them made each task's validation two whole-suite runs."""
    import dataclasses
    from types import SimpleNamespace

    import taskforge.reward.reward as reward_mod
    from taskforge.dataset.reader import Dataset as Reader

    @dataclasses.dataclass(frozen=True)
    class Task:
        instance_id: str
        patch: str
        fail_to_pass: tuple[str, ...]
        pass_to_pass: tuple[str, ...]

    task = Task("t1", "diff", ("a.py::f",), ("a.py::p",))
    monkeypatch.setattr(Reader, "open", classmethod(lambda cls, path: SimpleNamespace(tasks=lambda: [task])))
    graded = []

    def fake_many(pairs, *, on_result=None, **_kw):
        results = []
        for i, (t, patch) in enumerate(pairs):
            graded.append((t.fail_to_pass, t.pass_to_pass, patch))
            results.append(SimpleNamespace(score=1.0 if patch else 0.0, fraction=1.0 if patch else 0.0, flags=()))
            if on_result is not None:
                on_result(i, results[-1])
        return results

    monkeypatch.setattr(reward_mod, "reward_many", fake_many)
    res = _invoke("validate", str(tmp_path), "--sandbox", "local", "--work-dir", str(tmp_path / "work"), "--json")
    assert res.exit_code == 0, res.output
    assert graded == [(("a.py::f",), ("a.py::p",), "diff"), (("a.py::f",), (), "")]
