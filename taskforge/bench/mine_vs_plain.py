"""Check ``taskforge mine`` against a plain ``pytest`` run of the same source in a fresh virtualenv.

    python -m taskforge.bench.mine_vs_plain pypi:inflection==0.5.1 pypi:parse==1.22.4 \
        --profiles datasets/out/profiles [--work-dir DIR] [--json]

For each source: load its profile from ``--profiles`` (or mine it there when absent), then build a
*fresh* virtualenv the ordinary way (``pip install <sdist or tree>[extras]`` + the detected test
requirements + pytest, and pytest-cov/pytest-xdist when the project's addopts need them), run
``pytest -rA --continue-on-collection-errors`` in an untouched copy of the checkout with the project's
own configuration, and compare the node ids that passed and failed. The project is installed normally
there (its code stays in site-packages), unlike the sandbox: agreement shows that stripping the
installed copy and importing from the workspace changes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generators.sources import resolve_source
from taskforge.core.process import run_capture
from taskforge.core.settings import Settings
from taskforge.profile.build import PROFILE_FILE, Profile, build_profile

_KINDS = ("PASSED", "FAILED", "ERROR", "XFAIL", "XPASS")
_SUMMARY = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)")


@dataclass(frozen=True, slots=True)
class PlainRun:
    passed: frozenset[str]  # PASSED + XFAIL node ids
    failed: frozenset[str]  # FAILED + ERROR (with a node id) + XPASS
    skipped: int
    collection_errors: tuple[str, ...]
    exit_code: int | None
    summary: str


def plain_pytest(profile: Profile, work: Path, sdists_dir: Path, timeout_s: float = 1800.0) -> PlainRun:
    """Fresh venv, ordinary install, plain pytest in a copy of the checkout."""
    spec = profile.spec
    root = Path(tempfile.mkdtemp(prefix=f"plain-{profile.snapshot.slug}-", dir=work))
    try:
        venv = root / "venv"
        rc, out = run_capture([sys.executable, "-m", "venv", str(venv)], 300)
        if rc != 0:
            raise RuntimeError(f"venv failed: {out[-500:]}")
        tree = root / "tree"
        shutil.copytree(profile.snapshot.path, tree, ignore=shutil.ignore_patterns(".git"))
        install = root / "install-src"
        shutil.copytree(profile.snapshot.path, install, ignore=shutil.ignore_patterns(".git"))
        sdists = sorted(sdists_dir.glob(f"{profile.snapshot.slug}/*"))
        target = str(sdists[0]) if profile.snapshot.source.startswith("pypi:") and sdists else str(install)
        extras = spec.install_target.partition("[")[2]
        reqs = [*spec.requirements, "pytest"]
        addopts = " ".join(_configured_addopts(tree))
        if "--cov" in addopts:
            reqs.append("pytest-cov")
        if re.search(r"(^|\s)(-n|--numprocesses)", addopts):
            reqs.append("pytest-xdist")
        argv = [str(venv / "bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *reqs]
        if spec.install_target:
            argv.append(target + (f"[{extras}" if extras else ""))
        rc, out = run_capture(argv, timeout_s)
        if rc != 0:
            raise RuntimeError(f"plain install failed: {out[-800:]}")
        rc, out = run_capture([str(venv / "bin/pytest"), "-rA", "--tb=no", "-p", "no:cacheprovider",
                               "--continue-on-collection-errors"], timeout_s, cwd=tree,
                              env={**os.environ, "COLUMNS": "500"})
        return _parse(out, rc)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _configured_addopts(tree: Path) -> list[str]:
    from generators.env_detect import _pytest_ini, _read_ini, _read_toml

    ini, _ = _pytest_ini(tree, _read_toml(tree / "pyproject.toml"), _read_ini(tree / "setup.cfg"),
                         _read_ini(tree / "tox.ini"))
    value = ini.get("addopts", "")
    return [str(v) for v in value] if isinstance(value, list) else str(value).split()


def _parse(out: str, rc: int | None) -> PlainRun:
    passed: set[str] = set()
    failed: set[str] = set()
    collection: list[str] = []
    for line in out.splitlines():
        kind, _, rest = line.rstrip().partition(" ")
        if kind not in _KINDS or not rest:
            continue
        # PASSED lines hold only the node id (which may contain spaces); the others end in " - reason"
        nodeid = rest if kind == "PASSED" else rest.split(" - ", 1)[0]
        if kind in ("PASSED", "XFAIL"):
            passed.add(nodeid)
        elif kind == "ERROR" and "::" not in nodeid:
            collection.append(nodeid)
        else:
            failed.add(nodeid)
    tail = [ln for ln in out.splitlines() if ln.startswith("=") and " in " in ln]
    summary = tail[-1].strip("= ") if tail else ""
    skipped = sum(int(n) for n, k in _SUMMARY.findall(summary) if k == "skipped")
    return PlainRun(frozenset(passed), frozenset(failed), skipped, tuple(collection), rc, summary)


def compare(source: str, profiles: Path, settings: Settings) -> dict[str, Any]:
    snap = resolve_source(source, Path(settings.work_dir))
    pdir = profiles / snap.slug
    if (pdir / PROFILE_FILE).is_file():
        profile = Profile.load(pdir)
    else:
        from sandboxes.selection import make_sandbox

        profile = build_profile(source, settings, make_sandbox(settings))
        profile.save(pdir)
    work = Path(settings.work_dir) / "plain"
    work.mkdir(parents=True, exist_ok=True)
    plain = plain_pytest(profile, work, Path(settings.work_dir) / "sdists")
    b = profile.baseline
    mine_failed = b.failed - b.flaky
    return {
        "source": source,
        "mine_passed": len(b.passed), "mine_failed": len(b.failed), "mine_flaky": len(b.flaky),
        "mine_skipped": len(b.skipped), "mine_collection_errors": len(b.collection_errors),
        "plain_passed": len(plain.passed), "plain_failed": len(plain.failed), "plain_skipped": plain.skipped,
        "plain_collection_errors": len(plain.collection_errors), "plain_summary": plain.summary,
        "passed_agree": set(b.passed) == set(plain.passed) - set(b.flaky),
        "failed_agree": set(mine_failed) == set(plain.failed) - set(b.flaky),
        "only_mine_passed": sorted(set(b.passed) - plain.passed)[:10],
        "only_plain_passed": sorted(plain.passed - set(b.passed) - set(b.flaky))[:10],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="+")
    ap.add_argument("--profiles", type=Path, default=Path("datasets/out/profiles"))
    ap.add_argument("--work-dir", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    settings = Settings.load({"work_dir": args.work_dir})
    ok = True
    rows = []
    for source in args.sources:
        try:
            row = compare(source, args.profiles, settings)
        except Exception as exc:  # noqa: BLE001 - report and continue with the next source
            print(f"error: {source}: {type(exc).__name__}: {exc}", file=sys.stderr)
            ok = False
            continue
        ok &= row["passed_agree"] and row["failed_agree"]
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
    if not args.json:
        head = f"{'source':28} {'mine p/f/flaky/skip':>22} {'plain p/f/skip':>16} {'coll.err m/p':>12} agree"
        print(head)
        for r in rows:
            mine = f"{r['mine_passed']}/{r['mine_failed']}/{r['mine_flaky']}/{r['mine_skipped']}"
            plain = f"{r['plain_passed']}/{r['plain_failed']}/{r['plain_skipped']}"
            errs = f"{r['mine_collection_errors']}/{r['plain_collection_errors']}"
            print(f"{r['source']:28} {mine:>22} {plain:>16} {errs:>12} {r['passed_agree'] and r['failed_agree']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
