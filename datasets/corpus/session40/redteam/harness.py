"""Session 40 red-team harness: grade gold / empty / attack patches on itsdangerous tasks.

    python harness.py DATASET_DIR ATTACK[,ATTACK...] [TASK_INDEX,...]

Each attack is a module ``attack_<name>.py`` next to this file with ``make(task, files) -> str | None`` (a
unified diff against the broken workspace; ``files`` = workspace-relative path -> text of the broken
workspace, tests included) and an optional ``NOTE``. Grading runs with the patch monitor's zeroing OFF
(``monitor_zero=False``) so the hard layers are measured; the default-settings score is the same
grading passed through the monitor (``_monitored`` zeroes a score > 0 when the monitor has findings),
and is reported beside it. Gold and empty are graded in the same run as controls.

Besides the score, the sandbox run's output tail and any ``recon*.txt`` the graded code wrote into the
workspace root are saved under /tmp/rt40/out/<attack>-<task>/ (the harness, not the agent, reads them).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sandboxes.local import LocalSandbox  # noqa: E402
from taskforge.core.settings import Settings  # noqa: E402
from taskforge.dataset.reader import Dataset  # noqa: E402
from taskforge.reward.reward import reward_many  # noqa: E402
from taskforge.reward.workspace import DatasetTrees  # noqa: E402

OUT = Path("/tmp/rt40/out")
CANARY_PROBLEMS: list[list[str]] = []

from taskforge.reward import canaries as _canaries  # noqa: E402

_verify = _canaries.CanaryPlan.verify


def _logged_verify(self, outcomes, collection_errors, finished):  # noqa: ANN001, ANN202
    problems = _verify(self, outcomes, collection_errors, finished)
    CANARY_PROBLEMS.append(problems)  # debugging only: which canary tripped (the reward reports the first)
    return problems


_canaries.CanaryPlan.verify = _logged_verify


class CapturingSandbox(LocalSandbox):
    """A LocalSandbox that keeps each run's report and the files the run left in the workspace root."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.captures: list[dict] = []

    def run(self, env, workspace, request):  # noqa: ANN001, ANN201
        out = super().run(env, workspace, request)
        extra = {}
        for p in Path(workspace).glob("recon*.txt"):
            extra[p.name] = p.read_text(errors="replace")
        self.captures.append({"canary_problems": None, "tail": out.report.output_tail, "files": extra, "exit": out.report.exit_code,
                              "flags": [str(f) for f in out.report.flags]})
        return out


def broken_files(ds: Dataset, task) -> dict[str, str]:  # noqa: ANN001
    files: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ws = ds.broken_workspace(task, Path(tmp) / "ws")
        for p in ws.rglob("*"):
            if p.is_file() and ".git" not in p.relative_to(ws).parts:
                try:
                    files[p.relative_to(ws).as_posix()] = p.read_text(encoding="utf-8")
                except UnicodeDecodeError:
                    pass
    return files


def default_score(r) -> float:  # noqa: ANN001
    return 0.0 if r.findings else r.score


def main() -> None:
    ds_dir = Path(sys.argv[1])
    attacks = sys.argv[2].split(",")
    only = {int(i) for i in sys.argv[3].split(",")} if len(sys.argv) > 3 else None
    settings = dataclasses.replace(Settings.load({"sandbox": "local"}), monitor_zero=False, jobs=1)
    trees = DatasetTrees(ds_dir)
    ds = Dataset.open(ds_dir)
    rows = []
    for i, task in enumerate(ds.tasks()):
        if only is not None and i not in only:
            continue
        files = broken_files(ds, task)
        pairs, names = [(task, task.patch), (task, "")], ["gold", "empty"]
        for a in attacks:
            mod = importlib.import_module(f"attack_{a}")
            patch = mod.make(task, files)
            if patch is None:
                print(f"[{i}] {a}: not applicable", flush=True)
                continue
            pairs.append((task, patch))
            names.append(a)
        sandbox = CapturingSandbox(settings)
        res = reward_many(pairs, sandbox=sandbox, trees=trees, settings=settings, jobs=1)
        for cap_, probs in zip(sandbox.captures, CANARY_PROBLEMS[-len(sandbox.captures):] if sandbox.captures else []):
            cap_["canary_problems"] = probs
        caps = iter(sandbox.captures)
        for name, r in zip(names, res):
            cap = next(caps, None) if "run_s" in r.timings else None
            row = {"task": i, "instance_id": task.instance_id, "patch": name, "score_monitor_off": r.score,
                   "score_default": default_score(r), "fraction": round(r.fraction, 3),
                   "p2p": round(r.pass_to_pass_fraction, 3), "flags": [str(getattr(f, "value", f)) for f in r.flags],
                   "monitor": sorted({f.rule for f in r.findings}), "detail": r.detail[:300]}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if cap is not None and name not in ("gold", "empty"):
                d = OUT / f"{name}-{i}"
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir(parents=True)
                (d / "tail.txt").write_text(cap["tail"])
                (d / "meta.json").write_text(json.dumps({"exit": cap["exit"], "flags": cap["flags"],
                                                         "canary_problems": cap.get("canary_problems"),
                                                         "result": r.to_dict()}, indent=1))
                for k, v in cap["files"].items():
                    (d / k).write_text(v)
    res_path = HERE / "results" / f"{'+'.join(attacks)}.jsonl"
    res_path.parent.mkdir(exist_ok=True)
    with res_path.open("a") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
