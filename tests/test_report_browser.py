"""The report of a REAL generated dataset and a REAL training log, opened in headless Chromium.

Once per session: ``taskforge generate pypi:inflection==0.5.1 --max-tasks 2`` (local sandbox), then
``taskforge train --policy simulated`` for a few steps with real grading, then ``taskforge report``.
Chromium (Debian ``chromium`` + ``chromium-driver``, driven by selenium) then checks that vega-embed
drew every figure from its Vega-Lite spec (``data-rendered="1"``, an ``<svg>`` with a non-zero box and
drawn marks), that the page requested nothing but itself and logged no error, that a figure whose spec
is broken shows its error in place while the others still draw, that the filter box filters and that
clicking a task shows its problem statement, gold patch and test patch side by side, diff lines
colored. The time from navigation to the last figure drawn is printed (also for a 100-task report).
Screenshots go to ``artifacts/report-browser/`` (git-ignored); their paths are printed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taskforge.dataset.reader import Dataset
from taskforge.report.data import ReportData
from taskforge.report.figures import figure_specs
from taskforge.report.html import render_html
from taskforge.report.vega import javascript_bundle

pytestmark = [pytest.mark.realrepo, pytest.mark.slow, pytest.mark.timeout(5400)]  # generate + train run in setup

REPO_ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO_ROOT / "artifacts" / "report-browser"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
TASKFORGE = [sys.executable, "-c", "from taskforge.cli import main; main()"]


def _run(args: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen([*TASKFORGE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=REPO_ROOT, env={**os.environ, **(env or {})})
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"taskforge {' '.join(args[:2])} ran past {timeout:.0f} s: {err[-2000:]}")
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert result.returncode == 0, f"taskforge {' '.join(args)} failed: {err[-3000:]}"
    return result


@pytest.fixture(scope="session")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A dataset written by `taskforge generate` on inflection 0.5.1, and a `taskforge train` log on it."""
    root = tmp_path_factory.mktemp("report-real")
    dataset, log = root / "ds", root / "metrics.jsonl"
    # A work area outside this repository: inside it, pytest runs in the workspaces would take this
    # repository's pyproject.toml as their rootdir and report node ids relative to it.
    work = {"TASKFORGE_WORK_DIR": str(root / "work")}
    _run(["generate", "pypi:inflection==0.5.1", "--max-tasks", "2", "--out", str(dataset), "--sandbox", "local"],
         timeout=2400, env=work)
    assert len(Dataset.open(dataset)) == 2
    _run(["train", str(dataset), "--policy", "simulated", "--steps", "3", "--group-size", "2", "--batch-size", "2",
          "--sandbox", "local", "--log", str(log), "--state", str(root / "state.json")], timeout=2400, env=work)
    assert len(log.read_text().splitlines()) == 3
    return dataset, log


@pytest.fixture(scope="session")
def report(generated: tuple[Path, Path]) -> Path:
    dataset, log = generated
    out = dataset.parent / "report.html"
    _run(["report", str(dataset), "--train-log", str(log), "--out", str(out)], timeout=600)
    return out


@pytest.fixture
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("needs Debian chromium + chromium-driver (make host / apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="taskforge-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-quic", "--window-size=1400,1000",
                f"--user-data-dir={profile}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})  # requests, console
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _screenshot(driver: Any, name: str, full: bool = False) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    if full:
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1400, min(int(height) + 40, 16000))
    path = ARTIFACTS / name
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000
    print(f"screenshot: {path}")
    return path


_FIGURES = """
    return Array.from(document.querySelectorAll('figure.plot')).map(f => {
      const s = f.querySelector('svg'); const r = s ? s.getBoundingClientRect() : {width: 0, height: 0};
      const marks = s ? s.querySelectorAll('g.role-mark > path, g.role-mark > rect, g.role-mark > line').length : 0;
      const err = f.querySelector('.plot-error');
      return {key: f.dataset.key, rendered: f.dataset.rendered || null, width: r.width, height: r.height, marks: marks,
              error: err ? err.textContent : null, errorShown: err ? err.getBoundingClientRect().height > 0 : false};
    });"""


def _open(driver: Any, page: Path, timeout: float = 60) -> tuple[list[dict[str, Any]], float]:
    """Load ``page`` and wait until every figure settled; returns the figures' state and the ms it took."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("performance")  # drop what chromium requested before (its own start page)
    driver.get(page.as_uri())
    WebDriverWait(driver, timeout).until(lambda d: d.execute_script("return document.body.dataset.figures") == "done")
    return driver.execute_script(_FIGURES), float(driver.execute_script("return document.body.dataset.figuresMs"))


def _requests(driver: Any) -> list[tuple[str, str]]:
    """(document, url) of each request chromium logged since the last call (its own chrome:// pages included)."""
    messages = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
    return [(m["params"].get("documentURL", ""), m["params"]["request"]["url"]) for m in messages
            if m["method"] == "Network.requestWillBeSent"]


@pytest.mark.browser
def test_report_of_a_real_dataset_and_training_log_renders_in_chromium(generated: tuple[Path, Path], report: Path,
                                                                        browser: Any) -> None:
    from selenium.webdriver.common.by import By

    dataset, log = generated
    data = ReportData.collect(dataset, log)
    expected = [s.key for s in figure_specs(data)]
    assert {"funnel-inflection", "difficulty", "test-sizes", "lines-deleted", "validation-time", "audit",
            "train-pass-rate", "train-difficulty", "train-zero-variance", "grading-time"} <= set(expected)
    figures, ms = _open(browser, report)
    print(f"{len(figures)} figures drawn {ms:.0f} ms after navigation started")
    assert sorted(f["key"] for f in figures) == sorted(expected)  # each figure exactly once
    for f in figures:  # drawn by vega-embed: an <svg> of real size with its data marks in it
        assert f["rendered"] == "1" and f["error"] is None, f
        assert f["width"] > 300 and f["height"] > 100 and f["marks"] > 0, f
    requests = _requests(browser)
    assert [url for doc, url in requests if doc == report.as_uri()] == [report.as_uri()]  # the page, nothing else
    assert not [url for _, url in requests if not url.startswith(("chrome:", "chrome-untrusted:", "file:", "data:"))]
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
    assert browser.find_elements(By.CSS_SELECTOR, "img") == []
    _screenshot(browser, "report-full.png", full=True)


@pytest.mark.browser
def test_a_figure_that_cannot_be_drawn_says_why_and_the_others_still_draw(generated: tuple[Path, Path],
                                                                           browser: Any, tmp_path: Path) -> None:
    data = ReportData.collect(*generated)
    specs = figure_specs(data)
    broken = dataclasses.replace(specs[0], spec={**specs[0].spec, "layer": [{"mark": "no-such-mark"}]})
    page = tmp_path / "broken.html"
    page.write_text(render_html(data, [broken, *specs[1:]], javascript_bundle()), encoding="utf-8")
    figures, _ = _open(browser, page)
    first, rest = figures[0], figures[1:]
    assert first["key"] == broken.key and first["rendered"] == "error" and first["errorShown"], first
    assert first["error"].startswith("Figure not drawn: ") and len(first["error"]) > 30, first  # the reason, one line
    assert "\n" not in first["error"] and first["marks"] == 0
    assert rest and all(f["rendered"] == "1" and f["marks"] > 0 for f in rest), rest


@pytest.mark.browser
def test_clicking_a_task_shows_its_problem_gold_patch_and_hidden_tests(generated: tuple[Path, Path], report: Path,
                                                                      browser: Any) -> None:
    from selenium.webdriver.common.by import By

    tasks = {t.instance_id: t for t in Dataset.open(generated[0]).tasks()}
    browser.get(report.as_uri())
    rows = browser.find_elements(By.CSS_SELECTOR, "#task-table tbody tr")
    assert sorted(r.get_attribute("data-id") for r in rows) == sorted(tasks)
    assert not browser.find_element(By.ID, "task-detail").is_displayed()

    target = rows[-1].get_attribute("data-id")
    box = browser.find_element(By.ID, "task-filter")
    box.send_keys(tasks[target].strategy + " " + target[-8:])
    visible = [r.get_attribute("data-id") for r in rows if r.is_displayed()]
    assert visible == [target] and browser.find_element(By.ID, "task-count").text == f"1 of {len(tasks)} tasks"
    box.clear()
    box.send_keys(" ")  # clear() fires no input event; any input re-filters
    assert all(r.is_displayed() for r in rows)

    row = next(r for r in rows if r.get_attribute("data-id") == target)
    row.click()
    detail = browser.find_element(By.ID, "task-detail")
    assert detail.is_displayed() and detail.get_attribute("data-instance") == target
    task = tasks[target]
    shown = browser.execute_script("""
        const lines = id => Array.from(document.querySelectorAll('#' + id + ' span')).map(s => [s.className, s.textContent]);
        const col = id => document.getElementById(id).getBoundingClientRect();
        return {patch: lines('detail-patch'), tests: lines('detail-tests'),
                problem: document.getElementById('detail-problem').textContent,
                cols: ['detail-problem', 'detail-patch', 'detail-tests'].map(id => [col(id).left, col(id).top, col(id).width]),
                add: getComputedStyle(document.querySelector('#detail-patch .d-add')).backgroundColor};""")
    assert [text for _, text in shown["patch"]] == task.patch.rstrip("\n").split("\n")
    assert [text for _, text in shown["tests"]] == task.test_patch.rstrip("\n").split("\n")
    assert shown["problem"] == task.problem_statement
    added = [t for c, t in shown["patch"] if c == "d-add"]
    assert added and added == [ln for ln in task.patch.split("\n") if ln.startswith("+") and not ln.startswith("+++")]
    assert shown["add"] not in ("rgba(0, 0, 0, 0)", "transparent")  # added lines are colored
    (l1, t1, w1), (l2, t2, w2), (l3, t3, w3) = shown["cols"]
    assert l1 < l2 < l3 and abs(t1 - t2) < 2 and abs(t2 - t3) < 2 and min(w1, w2, w3) > 250  # side by side
    browser.execute_script("arguments[0].scrollIntoView()", detail)
    time.sleep(0.2)
    _screenshot(browser, "report-task-detail.png")


def test_report_of_100_real_tasks_renders_quickly(generated: tuple[Path, Path], tmp_path: Path) -> None:
    """The real tasks replicated to 100 through the real DatasetWriter (taskforge.bench.report_speed)."""
    from taskforge.bench.report_speed import build_dataset
    from taskforge.report.html import write_report

    dataset, log = generated
    big = build_dataset(dataset, tmp_path / "ds100", 100, 4)
    javascript_bundle()  # the bundle is built once per work area; time the page, not that
    start = time.perf_counter()
    cpu = time.process_time()
    out = write_report(big, tmp_path / "r.html", log)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"report of 100 tasks: {wall:.2f} s wall, {cpu:.2f} s CPU in this process "
          f"(load average {os.getloadavg()[0]:.1f}), {out.stat().st_size / 1024:.0f} KiB")
    assert out.read_text().count('<tr tabindex="0" data-id=') == 100
    assert wall < 60  # generous: the target is < 2 s on an idle machine (see taskforge.bench.report_speed)


@pytest.mark.browser
def test_report_of_100_real_tasks_draws_every_figure_in_chromium(generated: tuple[Path, Path], tmp_path: Path,
                                                                 browser: Any) -> None:
    from taskforge.bench.report_speed import build_dataset
    from taskforge.report.html import write_report

    dataset, log = generated
    out = write_report(build_dataset(dataset, tmp_path / "ds100", 100, 4), tmp_path / "r.html", log)
    times = []
    for _ in range(2):  # the first load also warms chromium up
        figures, ms = _open(browser, out)
        assert len(figures) == len(figure_specs(ReportData.collect(tmp_path / "ds100", log))) >= 15
        assert all(f["rendered"] == "1" and f["marks"] > 0 for f in figures), figures
        times.append(ms)
    print(f"100-task report: {len(figures)} figures drawn {times[0]:.0f} ms (first load), {times[1]:.0f} ms "
          f"(second) after navigation started (load average {os.getloadavg()[0]:.1f})")
    assert max(times) < 30_000  # generous: drawing takes about a second on an idle 2-core machine
    _screenshot(browser, "report-100-tasks.png", full=True)
