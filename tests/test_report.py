"""`taskforge report` and the card figures on small datasets the tests write (fast; the browser and real
generated data are in tests/test_report_browser.py)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from taskforge.cli import app
from taskforge.dataset import DatasetWriter, RunFunnel, write_tasks
from taskforge.errors import DatasetError
from taskforge.outcomes import Rejected, RejectReason
from taskforge.report.card_figures import embed_figures
from taskforge.report.data import ReportData, TrainStep, read_train_log
from taskforge.report.figures import figure_specs, render, render_all
from taskforge.report.html import RenderedFigure, render_html
from taskforge.task import AuditResult, LeakHit, ValidationRun
from tests.strategies import sample_task

runner = CliRunner()
EVIL = "</script><script>alert('x')</script> & <b>"


def _step(step: int, pass_rate: float, target: float | None = 0.3) -> dict[str, object]:
    return {"step": step, "pass_rate": pass_rate, "difficulty_mean": 0.3 + step / 100, "difficulty_std": 0.05,
            "target": target, "zero_variance_fraction": 0.5, "grading_seconds": 4.0, "step_seconds": 4.5,
            "rollouts": 8, "gen_batches": 1, "kept_groups": 2, "loss": 0.1, "policy": {}, "flags": {}}


def _tasks() -> list:
    tasks = [sample_task(i, strategy=("stub", "delete", "module")[i % 3]) for i in range(6)]
    leaked = dataclasses.replace(
        tasks[1], problem_statement=EVIL,
        validation=(ValidationRun("empty_patch", 1, True, {}, 2.0), ValidationRun("gold_patch", 1, True, {}, 1.0)),
        audit=AuditResult(("workspace", "git"), (LeakHit("git", ".git/objects/ab", "def func1("),), 9, 0.2))
    tasks[1] = leaked
    tasks.append(sample_task(9, repo="other", strategy="stub"))
    return tasks


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    with DatasetWriter(root, write_card=False) as w:
        w.add_all(_tasks())
        w.record_run(RunFunnel.from_outcomes(
            "demo@0", "pypi:demo==1.0", "demo", 6,
            [Rejected("a", RejectReason.TRIVIAL_BODY)] * 5 + [Rejected("b", RejectReason.UNSTABLE)] * 2,
            candidates=15, extra={"profile_seconds": 10.0, "stage_seconds": {"contract": 20.0, "covering": 5.0}}))
    return root


@pytest.fixture
def train_log(tmp_path: Path) -> Path:
    path = tmp_path / "metrics.jsonl"
    lines = [_step(1, 0.25), _step(2, 0.5), _step(3, 0.75, None), _step(2, 0.4)]  # resumed: step 2 again
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    return path


def test_collect_summarises_funnel_tasks_and_timings(dataset: Path) -> None:
    data = ReportData.collect(dataset)
    assert [r.repo for r in data.repos] == ["demo", "other"]
    demo, other = data.repos
    assert (demo.candidates, demo.accepted, demo.unaccounted) == (15, 6, 2)
    assert demo.rejected == (("trivial_body", 5), ("unstable", 2))
    assert demo.tasks_by_strategy == (("stub", 2), ("delete", 2), ("module", 2))  # tier order
    assert demo.stage_seconds == (("profile", 10.0), ("contract", 20.0), ("covering", 5.0))
    assert (other.candidates, other.tasks_by_strategy) == (0, (("stub", 1),))  # no funnel recorded
    assert [t.instance_id for t in data.tasks] == sorted(t.instance_id for t in data.tasks)
    leaked = next(t for t in data.tasks if not t.audit_passed)
    assert leaked.audit_hits == (("git", ".git/objects/ab", "def func1("),)
    assert leaked.validation_seconds == 3.0 and leaked.problem_statement == EVIL
    assert ReportData.from_dict(json.loads(json.dumps(data.to_dict()))) == data


def test_train_log_is_read_in_step_order_and_a_resumed_step_replaces_the_earlier_one(train_log: Path) -> None:
    steps = read_train_log(train_log)
    assert [s.step for s in steps] == [1, 2, 3]
    assert steps[1].pass_rate == 0.4 and steps[2].target is None
    assert TrainStep.from_dict(steps[0].to_dict()) == steps[0]


def test_bad_train_log_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps(_step(1, 0.5)) + "\n{\"step\": 2}\n")
    with pytest.raises(DatasetError, match=r"log\.jsonl:2 is not a step"):
        read_train_log(path)
    with pytest.raises(DatasetError, match="does not exist"):
        read_train_log(tmp_path / "missing.jsonl")


def test_figures_exist_exactly_where_their_data_does(dataset: Path, train_log: Path, tmp_path: Path) -> None:
    keys = [s.key for s in figure_specs(ReportData.collect(dataset))]
    assert keys == ["funnel-demo", "strategies", "stage-time", "difficulty", "test-sizes", "lines-deleted",
                    "validation-time", "audit"]  # no funnel for "other": none was recorded
    with_log = [s.key for s in figure_specs(ReportData.collect(dataset, train_log))]
    assert with_log[len(keys):] == ["train-pass-rate", "train-difficulty", "train-zero-variance", "grading-time"]
    empty = tmp_path / "empty"
    write_tasks(empty, [], write_card=False)
    assert figure_specs(ReportData.collect(empty)) == []


def test_rendering_is_deterministic_and_parallel_rendering_gives_the_same_bytes(dataset: Path, train_log: Path) -> None:
    specs = figure_specs(ReportData.collect(dataset, train_log))
    svg = render(specs[0], "svg")
    assert svg == render(specs[0], "svg") and b"<svg" in svg and b"<path" in svg
    assert render(specs[0], "png").startswith(b"\x89PNG\r\n\x1a\n")
    assert render_all(specs[:3], "svg", jobs=2) == [svg, *(render(s, "svg") for s in specs[1:3])]


def test_page_is_self_contained_and_its_task_data_survives_script_injection(dataset: Path, train_log: Path) -> None:
    data = ReportData.collect(dataset, train_log)
    figs = RenderedFigure.all(figure_specs(data), jobs=1)
    page = render_html(data, figs)
    assert page.count('<figure class="plot"') == len(figs) == 12
    for f in figs:
        assert f'data-key="{f.spec.key}"><svg' in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//|@import|url\(\s*["']?https?:""", page)
    assert EVIL not in page  # the hostile problem statement cannot close the data <script>
    blob = re.search(r'<script type="application/json" id="task-data">(.*?)</script>', page, re.S)
    assert blob is not None
    tasks = {t["instance_id"]: t for t in json.loads(blob.group(1))["tasks"]}
    assert len(tasks) == 7 and any(t["problem_statement"] == EVIL for t in tasks.values())
    assert all(t["patch"] == task.patch for task in _tasks() for t in [tasks[task.instance_id]])
    assert page.count('<tr tabindex="0" data-id=') == 7
    assert "6 of 7 tasks clean" in page


def test_cli_writes_the_report_and_picks_up_the_default_train_log(dataset: Path, train_log: Path,
                                                                  tmp_path: Path) -> None:
    out = tmp_path / "r" / "report.html"
    result = runner.invoke(app, ["report", str(dataset), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["out"] == str(out) and summary["train_log"] is None and out.stat().st_size == summary["bytes"]
    assert 'id="fig-train-pass-rate"' not in out.read_text()
    (dataset / "train").mkdir()
    (dataset / "train" / "metrics.jsonl").write_text(train_log.read_text())
    result = runner.invoke(app, ["report", str(dataset), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert 'id="fig-train-pass-rate"' in out.read_text() and not list(out.parent.glob("*.tmp"))


def test_cli_user_errors_are_one_line(tmp_path: Path, dataset: Path) -> None:
    result = runner.invoke(app, ["report", str(tmp_path / "nope"), "--out", str(tmp_path / "r.html")])
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and "does not exist" in lines[0]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    result = runner.invoke(app, ["report", str(dataset), "--train-log", str(bad), "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 1 and "bad.jsonl:1 is not a step" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r.html").exists()


def test_card_embeds_the_dataset_figures_as_png_files(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with DatasetWriter(root) as w:  # the card is written by close(), as in `taskforge generate`
        w.add_all(_tasks())
        w.record_run(RunFunnel.from_outcomes("demo@0", "pypi:demo==1.0", "demo", 6,
                                             [Rejected("a", RejectReason.TRIVIAL_BODY)] * 3))
    card = (root / "README.md").read_text()
    links = re.findall(r"!\[[^]]+\]\((figures/[a-z0-9-]+\.png)\)", card)
    assert links == ["figures/funnel-demo.png", "figures/strategies.png", "figures/difficulty.png",
                     "figures/test-sizes.png", "figures/lines-deleted.png", "figures/validation-time.png",
                     "figures/audit.png"]
    for link in links:
        assert (root / link).read_bytes().startswith(b"\x89PNG")
    assert card.index("## Figures") < card.index("## Loading")
    (root / "figures" / "stale.png").write_bytes(b"x")
    assert embed_figures(root, "# card\n").startswith("# card\n\n## Figures")  # appended without an anchor
    assert not (root / "figures" / "stale.png").exists()
