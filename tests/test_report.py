"""`taskforge report` and the card figures on small datasets the tests write (fast; the browser and real
generated data are in tests/test_report_browser.py)."""

from __future__ import annotations

import dataclasses
import json
import re
import struct
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from taskforge.cli import app
from taskforge.core.errors import DatasetError
from taskforge.core.outcomes import Rejected, RejectReason
from taskforge.core.task import AuditResult, LeakHit, ValidationRun
from taskforge.dataset import DatasetWriter, RunFunnel, write_tasks
from taskforge.report import vega
from taskforge.report.card_figures import embed_figures
from taskforge.report.data import ReportData, TrainStep, read_train_log
from taskforge.report.figures import FigureSpec, figure_specs
from taskforge.report.html import render_html
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


def _marks(svg: str) -> dict[str, int]:
    """Items drawn per data mark of a Vega SVG: {"mark-rect layer_0_marks": 5, ...} (axes, legends excluded)."""
    out: dict[str, int] = {}
    for g in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}g"):
        cls = g.get("class", "").split()
        if "role-mark" in cls:
            name = " ".join(c for c in cls if c != "role-mark")
            out[name] = out.get(name, 0) + len(list(g))
    return out


def _texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]


def test_specs_are_deterministic_json_with_inline_data_and_the_pinned_schema(dataset: Path, train_log: Path) -> None:
    data = ReportData.collect(dataset, train_log)
    specs = figure_specs(data)
    assert json.dumps([s.spec for s in specs]) == json.dumps([s.spec for s in figure_specs(data)])
    for s in specs:
        text = json.dumps(s.spec, allow_nan=False)  # strict JSON: no NaN/Infinity sneaks into a spec
        assert json.loads(text) == s.spec, s.key
        assert s.spec["$schema"] == "https://vega.github.io/schema/vega-lite/v5.json"
        assert '"url"' not in text and "http" not in text.replace(vega.SCHEMA, ""), s.key  # data inline
        assert s.spec["description"].startswith(s.title)
    assert vega.VEGA_LITE_VERSION in __import__("vl_convert").get_vegalite_versions()


def test_histogram_rows_count_every_task_once_and_stack_without_gaps(dataset: Path) -> None:
    data = ReportData.collect(dataset)
    by_key = {s.key: s.spec for s in figure_specs(data)}
    rows = by_key["difficulty"]["data"]["values"]
    assert sum(r["count"] for r in rows) == len(data.tasks) == 7
    for lo in {r["lo"] for r in rows}:  # each bin's slices stack from 0 up, one on top of the other
        stack = sorted((r["y0"], r["y1"]) for r in rows if r["lo"] == lo)
        assert stack[0][0] == 0 and all(a[1] == b[0] for a, b in zip(stack, stack[1:], strict=False))
    f2p, p2p = (panel["data"]["values"] for panel in by_key["test-sizes"]["hconcat"])
    assert sum(r["count"] for r in f2p) == sum(r["count"] for r in p2p) == 7
    for r in f2p:  # each task is counted in the bin that holds its size
        assert r["count"] == sum(r["lo"] <= t.fail_to_pass < r["hi"] for t in data.tasks)
    assert sum(r["count"] for r in by_key["lines-deleted"]["data"]["values"]) == 7
    one = dataclasses.replace(data, tasks=tuple(dataclasses.replace(t, score=1.0) for t in data.tasks))
    top = next(s.spec for s in figure_specs(one) if s.key == "difficulty")["data"]["values"]
    assert {(r["lo"], r["hi"]) for r in top} == {(0.9, 1.0)}  # the last bin is closed: 1.0 is counted


def test_every_spec_renders_to_svg_with_its_data_drawn(dataset: Path, train_log: Path) -> None:
    specs = {s.key: s for s in figure_specs(ReportData.collect(dataset, train_log))}
    svgs = {k: vega.to_svg(s.spec) for k, s in specs.items()}
    for key, svg in svgs.items():
        marks = _marks(svg)
        assert marks and all(n > 0 for n in marks.values()), (key, marks)
    waterfall = [(r["x0"], r["x1"]) for r in specs["funnel-demo"].spec["data"]["values"]]
    assert waterfall == [(0, 15), (10, 15), (8, 10), (6, 8), (0, 6)]  # each rejection takes its share off the rest
    funnel = svgs["funnel-demo"]
    assert _marks(funnel)["mark-rect layer_0_marks"] == 5  # candidates, 2 reasons, not reached, accepted
    assert {"15 (100%)", "5 (33%)", "2 (13%)", "6 (40%)", "rejected: trivial_body", "not reached"} <= set(_texts(funnel))
    assert _marks(svgs["strategies"])["mark-rect layer_0_marks"] == 6  # 2 repos x 3 strategies
    assert {"tier 0 (stub)", "tier 1 (delete)", "tier 2 (module)"} <= set(_texts(svgs["difficulty"]))
    assert {"sampled mean", "± 1 std", "curriculum target"} <= set(_texts(svgs["train-difficulty"]))
    assert {"7/7", "0/1"} <= set(_texts(svgs["audit"]))  # workspace: all clean; git: audited once, leaked
    points = {k: n for k, n in _marks(svgs["train-pass-rate"]).items() if k.startswith("mark-symbol")}
    assert list(points.values()) == [3]  # one point per logged step


def test_bundle_is_cached_atomically_and_built_in_memory_where_the_cache_cannot_be_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builds: list[int] = []

    def build() -> str:
        builds.append(1)
        return "/* vega */ window.vegaEmbed=e;"

    monkeypatch.setattr(vega, "_build_bundle", build)
    monkeypatch.setattr(vega, "VENDOR_DIR", tmp_path / "no-vendor")  # a trimmed install: no shipped bundle
    cache = tmp_path / "assets"
    assert vega.javascript_bundle(cache) == vega.javascript_bundle(cache) == "/* vega */ window.vegaEmbed=e;"
    assert len(builds) == 1  # the second call read the cache
    path = cache / vega.bundle_name()
    assert path.name == f"vega-bundle-{__import__('vl_convert').__version__}-{vega.VEGA_LITE_VERSION}.js"
    assert [p.name for p in cache.iterdir()] == [path.name]  # no temp file left behind
    path.write_text("/* truncated")  # not a complete bundle: rebuilt and rewritten
    assert vega.javascript_bundle(cache).endswith("window.vegaEmbed=e;") and len(builds) == 2
    assert path.read_text().endswith("window.vegaEmbed=e;")
    (tmp_path / "file").write_text("x")  # a cache folder under a file cannot be created
    assert vega.javascript_bundle(tmp_path / "file" / "assets").endswith("window.vegaEmbed=e;") and len(builds) == 3
    monkeypatch.setenv("TASKFORGE_WORK_DIR", str(tmp_path / "work"))
    assert vega.default_cache_dir() == tmp_path / "work" / "report-assets"


def test_the_real_bundle_defines_vega_embed_and_cannot_close_its_script_element() -> None:
    js = vega.javascript_bundle()  # the shipped one
    assert "window.vegaEmbed=" in js and len(js) > 500_000
    assert "</script" not in js.lower() and "<!--" not in js


def test_the_shipped_bundle_is_what_vl_convert_builds_and_draws_the_cards_vega_lite(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The page draws with the vendored bundle, the card with vl-convert: both must be Vega-Lite
    VEGA_LITE_VERSION. With the pinned vl-convert the bundle is rebuilt byte for byte (else rerun
    ``python -m taskforge.report.vega --vendor``)."""
    import vl_convert

    shipped = vega.vendored_bundle_path().read_text(encoding="utf-8")
    assert vega.javascript_bundle() == shipped
    assert f'"{vega.VEGA_LITE_VERSION}.0"' in shipped and vega.VEGA_LITE_VERSION in vl_convert.get_vegalite_versions()
    if vl_convert.__version__ == "1.9.0":
        assert vega._build_bundle() == shipped


def test_page_is_self_contained_and_its_task_data_survives_script_injection(dataset: Path, train_log: Path) -> None:
    data = ReportData.collect(dataset, train_log)
    specs = figure_specs(data)
    bundle = "/* the vega bundle */ window.vegaEmbed = function () {};"
    page = render_html(data, specs, bundle)
    assert page.count('<figure class="plot"') == len(specs) == 12 and page.count(bundle) == 1
    for f in specs:
        assert f'data-key="{f.key}"><div class="vis"></div><figcaption><b>{f.title}.</b>' in page
    blob = re.search(r'<script type="application/json" id="figure-specs">(.*?)</script>', page, re.S)
    assert blob is not None and json.loads(blob.group(1)) == {f.key: f.spec for f in specs}
    assert page.index(blob.group(0)) < page.index(bundle) < page.index("vegaEmbed(fig.querySelector")
    assert not re.search(r"""(src|href)=["']?(https?:)?//|@import|url\(\s*["']?https?:""", page)
    assert EVIL not in page  # the hostile problem statement cannot close the data <script>
    blob = re.search(r'<script type="application/json" id="task-data">(.*?)</script>', page, re.S)
    assert blob is not None
    tasks = {t["instance_id"]: t for t in json.loads(blob.group(1))["tasks"]}
    assert len(tasks) == 7 and any(t["problem_statement"] == EVIL for t in tasks.values())
    assert all(t["patch"] == task.patch for task in _tasks() for t in [tasks[task.instance_id]])
    assert page.count('<tr tabindex="0" data-id=') == 7
    assert "6 of 7 tasks clean" in page
    hostile = FigureSpec("x", "tasks", "x", "x", {"title": EVIL, "mark": "bar"})
    assert EVIL not in render_html(data, [hostile], bundle)  # nor can a spec's text


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
    page = out.read_text()
    assert 'id="fig-train-pass-rate"' in page and not list(out.parent.glob("*.tmp"))
    assert page.count("window.vegaEmbed=") == 1  # the real bundle, inlined once


def test_cli_without_vl_convert_says_which_extra_to_install(dataset: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vl_convert", None)  # import vl_convert raises ImportError
    result = runner.invoke(app, ["report", str(dataset), "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 1 and "install the report extra (pip install vl-convert-python)" in result.output
    assert not (tmp_path / "r.html").exists()


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
        png = (root / link).read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and png[12:16] == b"IHDR" and png.endswith(b"IEND\xaeB`\x82")
        width, height = struct.unpack(">II", png[16:24])
        assert width > 400 and height > 150 and len(png) > 8_000, (link, width, height, len(png))
    assert card.index("## Figures") < card.index("## Loading")
    (root / "figures" / "stale.png").write_bytes(b"x")
    assert embed_figures(root, "# card\n").startswith("# card\n\n## Figures")  # appended without an anchor
    assert not (root / "figures" / "stale.png").exists()
