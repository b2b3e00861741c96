"""Index + every deletion strategy on real PyPI sdists: each broken workspace compiles and imports.

Also checks, on a sample, that the setup diff and then the gold diff through real `git apply` give back
the original bytes, and that hiding tests of the real suite leaves collectable test files.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from generators.deletion import Deletion
from generators.hidden_tests import hide_tests
from generators.registry import all_strategies
from generators.static_index import build_index
from taskforge.core import patches
from taskforge.core.entities import EntityKind
from taskforge.core.environment import EnvSpec
from taskforge.core.outcomes import Rejected

pytestmark = [pytest.mark.realrepo, pytest.mark.slow]

PACKAGES = {
    "inflection==0.5.1": EnvSpec("inflection", "3.11", ".", package_dirs=("inflection",),
                                 test_paths=("test_inflection.py",)),
    "jmespath==1.1.0": EnvSpec("jmespath", "3.11", ".", package_dirs=("jmespath",), test_paths=("tests",)),
}


def _sdist(req: str, dest: Path) -> Path:
    name, version = req.split("==")
    dl = dest / "dl"
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
                           "-d", str(dl), req], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"pip download {req} failed: {proc.stderr[-500:]}")
    archive = next(dl.glob(f"{name}-{version}.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(dest / "src", filter="data")
    return dest / "src" / f"{name}-{version}"


_DRIVER = """
import importlib, json, os, sys
failed = []
for ws, modules in json.load(open(sys.argv[1])):
    pid = os.fork()
    if pid == 0:  # a fresh import state per workspace, without a new interpreter each time
        sys.path.insert(0, ws)
        try:
            for m in modules:
                importlib.import_module(m)
        except BaseException as exc:
            sys.stderr.write(f"{ws}: {m}: {exc!r}\\n")
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        failed.append(ws)
print(json.dumps(failed))
"""


def _import_failures(jobs: list[tuple[str, list[str]]], tmp: Path) -> tuple[list[str], str]:
    """Workspaces (of ``jobs``: directory, modules) where importing every module fails."""
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-c", _DRIVER, str(tmp / "jobs.json")], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.mark.parametrize("req", sorted(PACKAGES))
def test_every_deletion_of_a_real_package_compiles_and_imports(req: str, tmp_path: Path) -> None:
    root = _sdist(req, tmp_path)
    spec = PACKAGES[req]
    t0 = time.monotonic()
    index = build_index(root, spec)
    t_index = time.monotonic() - t0
    assert index.parse_errors == ()
    modules = [e for e in index.entities if e.kind is EntityKind.MODULE]
    assert modules and len(index.entities) > len(modules)
    original = patches.read_tree(root)
    sources = {k: original[k] for k in index.source_files}
    counts: collections.Counter[str] = collections.Counter()
    jobs: list[tuple[str, list[str]]] = []
    names: dict[str, str] = {}
    checked_roundtrip = 0
    t0 = time.monotonic()
    for strategy in all_strategies().values():
        for entity in index.entities:
            if not strategy.applies_to(entity):
                continue
            out = strategy.delete(entity, index, root)
            if isinstance(out, Rejected):
                counts[f"{strategy.name}:rejected:{out.reason.value}"] += 1
                continue
            assert isinstance(out, Deletion)
            counts[f"{strategy.name}:ok"] += 1
            for rel, text in out.files_after.items():
                if text is not None:
                    compile(text, rel, "exec")
            work = tmp_path / "ws" / str(len(jobs))
            patches.write_tree({**sources, **out.files_after}, work)
            remaining = [m.qualname for m in modules if out.files_after.get(m.file, "") is not None]
            jobs.append((str(work), remaining))
            names[str(work)] = f"{strategy.name} {entity.qualname}"
            if checked_roundtrip < 6:  # real git apply: setup diff, then gold diff, gives back the bytes
                rt = tmp_path / f"rt{checked_roundtrip}"
                patches.write_tree(original, rt)
                patches.apply(out.setup_diff, rt)
                patches.apply(out.gold_diff, rt)
                assert patches.read_tree(rt) == original
                checked_roundtrip += 1
    t_delete = time.monotonic() - t0
    failed, log = _import_failures(jobs, tmp_path)
    print(f"\n{req}: {len(index.entities)} entities, index {t_index:.1f}s, deletions {t_delete:.1f}s, "
          f"{len(jobs)} workspaces imported, {dict(sorted(counts.items()))}")
    assert not failed, "\n".join([names[w] for w in failed[:5]] + [log[-1500:]])
    assert counts["stub:ok"] > 0 and counts["delete:ok"] > 0


def test_hiding_real_tests_keeps_other_tests_collectable(tmp_path: Path) -> None:
    root = _sdist("inflection==0.5.1", tmp_path)
    index = build_index(root, PACKAGES["inflection==0.5.1"])
    f2p = ["test_inflection.py::test_titleize[TheManWithoutAPast-The Man Without A Past]",
           "test_inflection.py::test_ordinal[1-st]", "test_inflection.py::test_ordinalize[1-1st]"]
    h = hide_tests(root, f2p, index=index, deleted=["inflection.ordinal"])
    assert h.unmatched == () and len(h.hidden) == 3
    assert "test_inflection.py::MIXTURE_TO_TITLEIZED" in h.helpers  # the test data only they used
    work = tmp_path / "ws"
    patches.write_tree(patches.read_tree(root), work)
    patches.write_tree(h.files_after, work)
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "test_inflection.py"], cwd=work, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(work)})
    assert proc.returncode == 0, proc.stdout[-800:]
    assert "test_titleize" not in proc.stdout and "test_ordinal[" not in proc.stdout
    assert "test_camelize[" in proc.stdout and "test_pluralize_plurals" in proc.stdout
    patches.apply(patches.diff(h.files_after, h.files_before), work)
    assert patches.read_tree(work) == patches.read_tree(root)
