"""``taskforge bench corpus`` end to end on a slice of the corpus: a real small package and a package that
does not exist (its failure is its row, and the run goes on)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.realrepo
@pytest.mark.slow
def test_corpus_slice_writes_table_and_json_and_survives_a_bad_package(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.toml"
    corpus.write_text('[[package]]\nname = "no-such-package-taskforge-h19"\nversion = "0.0.1"\n\n'
                      '[[package]]\nname = "inflection"\nversion = "0.5.1"\nsize = "small"\n')
    out, js, md = tmp_path / "out", tmp_path / "results.json", tmp_path / "CORPUS.md"
    argv = [sys.executable, "-c", "from taskforge.cli import main; main()", "bench", "corpus", "--list", str(corpus),
            "--plain", str(REPO / "datasets" / "corpus" / "plain_pytest.json"), "--budget-cpu-min", "2",
            "--validate-cpu-min", "1", "--out", str(out), "--json", str(js), "--md", str(md),
            "--generate-arg=--max-candidates=3", "--label", "slice"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    body = json.loads(js.read_text())
    bad, good = body["packages"]
    assert bad["name"] == "no-such-package-taskforge-h19" and bad["status"] == "failed"
    assert "no-such-package-taskforge-h19" in bad["error"] and bad["decided"] == 0
    assert good["status"] == "ok", good
    assert good["baseline_passed"] == good["plain_passed"] == 455 and good["pass_match"]
    assert good["candidates"] >= 3 and good["decided"] == 3 and good["funnel_from"] == "summary"
    assert 1 <= good["tasks_written"] <= 3 and sum(good["tasks_by_strategy"].values()) == good["tasks_written"]
    assert good["validate_status"] == "ok" and good["holds"] == good["tasks_written"]
    assert 1 <= good["validated_distinct"] <= good["tasks_written"]
    assert 0 < good["cpu_min"] <= 2.2 and good["suite_s"] > 0 and good["suite_eq_per_task"] > 0
    assert good["first_decision_s"] is not None and good["leftovers"] >= 0
    assert body["targets"]["packages"] == 2 and body["targets"]["ok"] == 1
    assert body["targets"]["pass_match"] == 1 and body["targets"]["pass_match_of"] == 1
    table = md.read_text()
    assert "# Corpus benchmark (slice)" in table
    assert "| inflection 0.5.1 | small | ok | 455/455 ✓ |" in table
    assert "- no-such-package-taskforge-h19 (failed): `" in table
    assert (out / "packages" / "inflection" / "result.json").is_file()
    # --resume runs nothing again: the same rows come back from the result files
    again = subprocess.run([*argv, "--resume"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(js.read_text())["packages"] == body["packages"]
