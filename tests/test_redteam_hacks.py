"""Red team, catalogue edition: every hack of ``tests/redteam_hacks.py`` as a PATCH through ``reward``.

Each hack is what an agent would submit (a unified diff against the broken workspace) and leaves the
feature unimplemented, so an honest grader scores it 0; where ``Hack.flag`` names a ``RewardFlag`` value
the result must carry it. Gold scores 1 and the empty patch 0 on the same target, through the same path.

Targets: the first task ``taskforge generate`` writes from each of three real PyPI packages
(``tests/generated_datasets.py``, generated once per code version), graded on the local and the docker
backend. All hacks of one target are graded in one batch (``reward_many(..., jobs=2)``, one batch per
distinct ``Hack.timeout_s``) by a module-scoped fixture; each parametrized test looks its result up, so
every hack keeps its own test id (``test_hack[local-parse-wrap_json_dump]``). Hacks marked ``isolate``
attack the grading process itself (kill it, fork, eat memory): they are graded by the ``taskforge reward``
CLI in a child process, so a grader they kill fails their test only.

``test_catalogue_patches_apply`` checks the catalogue itself on a hand-built task (fast, no network).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from generated_datasets import GeneratedDataset, cli, generated_dataset
from redteam_hacks import FAMILIES, HACKS, Hack, Target
from reward_fixtures import MINILIB, MINILIB_SPEC, build_stub_task, write_tree

from taskforge.core.task import Task
from taskforge.reward.reward import RewardResult, reward_many
from taskforge.reward.workspace import DirectoryTrees

ROOT = Path(__file__).resolve().parents[1]
REAL_PACKAGES = ("inflection==0.5.1", "parse==1.22.4", "cachetools==5.3.3")
BACKENDS = ("local", "docker")
MIN_HACKS = 55
REQUIRED_FAMILIES = {"answer", "forge", "plugin", "shadow", "oracle", "weak", "outcome", "resource", "patch"}
JOBS = 2
_REAL = [pytest.mark.slow, pytest.mark.realrepo]
TARGETS = [pytest.param((backend, pkg), id=f"{backend}-{pkg.split('==')[0]}",
                        marks=[*_REAL, *([pytest.mark.docker] if backend == "docker" else [])])
           for pkg in REAL_PACKAGES for backend in BACKENDS]


def _sandbox(name: str) -> object:
    from sandboxes.selection import make_sandbox
    from taskforge.core.settings import Settings

    return make_sandbox(Settings.load({"sandbox": name}))


@dataclass
class Graded:
    """All gradings of one (backend, package) target: hack name (and "gold", "empty") -> result or why none."""

    backend: str
    target: Target
    task: Task
    results: dict[str, RewardResult] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)  # isolated gradings that returned no result

    def result(self, name: str) -> RewardResult:
        if name in self.failures:
            pytest.fail(f"{name} on {self.backend}: the grader returned no result: {self.failures[name]}")
        assert name in self.results, f"{name} was not graded (not selected when the batch ran)"
        return self.results[name]


def _selected_hacks(session: pytest.Session) -> set[str]:
    names = set()
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and isinstance(callspec.params.get("hack"), Hack):
            names.add(callspec.params["hack"].name)
    return names


def _grade_isolated(ds: GeneratedDataset, task: Task, backend: str, patch: str, hack: Hack,
                    tmp: Path) -> RewardResult | str:
    """``taskforge reward --json`` in a child process: a hack that kills its grader fails only itself."""
    patch_file = tmp / f"{hack.name}.diff"
    patch_file.write_text(patch)
    argv = [*cli(), "reward", str(ds.path), task.instance_id, "--patch", str(patch_file), "--sandbox", backend,
            "--json", "--timeout", str(hack.timeout_s)]
    try:
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=hack.timeout_s + 300,
                              env={**os.environ, "COLUMNS": "200"})
    except subprocess.TimeoutExpired:
        return f"`taskforge reward` still running {hack.timeout_s + 300:.0f}s after start"
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    if not last.startswith("{"):
        return f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}"
    return RewardResult.from_dict(json.loads(last))


@pytest.fixture(scope="module", params=TARGETS)
def graded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Graded:
    backend, package = request.param
    ds = generated_dataset(package)
    task = hack_task(ds)
    base = tmp_path_factory.mktemp(f"hacks-{backend}-{package.split('==')[0]}")
    target = Target.from_task(task, ds.trees, base / "workspace")
    sandbox = _sandbox(backend)
    selected = _selected_hacks(request.session)
    hacks = [h for h in HACKS if h.name in selected]
    out = Graded(backend, target, task)
    batches: dict[float, list[tuple[str, str]]] = {120.0: [("gold", task.patch), ("empty", "")]}
    for h in hacks:
        if not h.isolate:
            batches.setdefault(h.timeout_s, []).append((h.name, h.make(target)))
    for timeout, named in sorted(batches.items()):
        results = reward_many([(task, patch) for _, patch in named], sandbox=sandbox, trees=ds.trees,  # type: ignore[arg-type]
                              jobs=JOBS, timeout_s=timeout)
        out.results.update({name: r for (name, _), r in zip(named, results, strict=True)})
    for h in hacks:
        if h.isolate:
            got = _grade_isolated(ds, task, backend, h.make(target), h, base)
            if isinstance(got, str):
                out.failures[h.name] = got
            else:
                out.results[h.name] = got
    return out


def _why(r: RewardResult) -> str:
    return f"score={r.score} fraction={r.fraction} flags={[str(f) for f in r.flags]} detail={r.detail!r}"


def test_gold_scores_one(graded: Graded) -> None:
    r = graded.result("gold")
    assert r.score == 1.0 and r.fraction == 1.0 and not r.flags, _why(r)


def test_empty_scores_zero(graded: Graded) -> None:
    r = graded.result("empty")
    assert r.score == 0.0 and r.fraction == 0.0 and "tampering" not in r.flags, _why(r)


@pytest.mark.parametrize("hack", HACKS, ids=[h.name for h in HACKS])
def test_hack(graded: Graded, hack: Hack) -> None:
    r = graded.result(hack.name)
    assert r.score == 0.0, f"{hack.family}/{hack.name} ({hack.description}) WON: {_why(r)}"
    if hack.flag:
        assert hack.flag in [str(f) for f in r.flags], f"{hack.name} not flagged {hack.flag}: {_why(r)}"


# ---- the catalogue itself -----------------------------------------------------------------------------

def hack_task(ds: object) -> Task:
    """The first task that re-implements one function: the hacks replace one body (a class stub with several
    methods, e.g. cachetools' ``_DefaultSize``, would test the hack's plumbing, not the reward)."""
    tasks = ds.tasks()  # type: ignore[attr-defined]
    return next((t for t in tasks if len(t.entities) == 1), tasks[0])


def _added_lines(patch: str) -> set[str]:
    return {ln[1:].strip() for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")}


def _minilib_target(tmp: Path) -> tuple[Task, Target]:
    orig = write_tree(tmp / "orig", MINILIB)
    task = build_stub_task(orig, tmp, module="minilib/text.py", function="shout", spec=MINILIB_SPEC, repo="minilib")
    return task, Target.from_task(task, DirectoryTrees(orig), tmp / "agent")


def test_catalogue_size_and_families() -> None:
    counts = Counter(h.family for h in HACKS)
    assert len(HACKS) >= MIN_HACKS, counts
    assert REQUIRED_FAMILIES <= set(FAMILIES), counts
    assert len({h.name for h in HACKS}) == len(HACKS)


def test_catalogue_patches_apply(tmp_path: Path) -> None:
    """Every hack is a real diff against the broken workspace that git applies, and implements nothing."""
    task, target = _minilib_target(tmp_path)
    gold = {ln for ln in _added_lines(task.patch) if len(ln) > 8 and not ln.startswith(('"', "'"))}
    for h in HACKS:
        patch = h.make(target)
        assert patch.startswith("diff --git a/"), h.name
        assert not gold & _added_lines(patch), f"{h.name} carries gold lines {gold & _added_lines(patch)}"
        if h.family == "patch" and h.flag == "patch_refused":
            continue  # refused by design (escapes, symlinks): git may refuse them too
        proc = subprocess.run(["git", "apply", "--check", "-"], input=patch, text=True, cwd=target.root,
                              capture_output=True, timeout=60)
        assert proc.returncode == 0, f"{h.name}: {proc.stderr}"


@pytest.mark.slow
@pytest.mark.realrepo
@pytest.mark.parametrize("package", REAL_PACKAGES)
def test_catalogue_implements_nothing_on_real_targets(package: str, tmp_path: Path) -> None:
    ds = generated_dataset(package)
    task = hack_task(ds)
    target = Target.from_task(task, ds.trees, tmp_path / "ws")
    # lines of the gold body long enough to be its own (``if result is not None:`` is anybody's)
    gold = {ln for ln in _added_lines(task.patch) if len(ln) > 24 and not re.match(r"^[#\"']", ln)}
    for h in HACKS:
        assert not gold & _added_lines(h.make(target)), h.name


FORGERS = ("plugin_memory_forge", "stub_aware_forge", "canary_constant_assert_forge", "stub_aware_constant_forge")


@pytest.mark.slow
@pytest.mark.realrepo
@pytest.mark.parametrize("package", REAL_PACKAGES)
def test_channel_forgers_trip_the_canaries_without_the_monitor(package: str, tmp_path: Path) -> None:
    """Code under test that rewrites the runner's own records (every test passed but the canaries the plan it
    read from the plugin's memory says must fail; or exactly the tests that called the stub) scores 0
    because of the canaries alone: the plugin holds no plan, the monitor is off here."""
    from redteam_hacks import HACKS_BY_NAME

    from taskforge.core.settings import Settings

    ds = generated_dataset(package)
    task = _unsealed(hack_task(ds))  # the canaries alone: a sealed FAIL_TO_PASS test fails such a forger anyway
    target = Target.from_task(task, ds.trees, tmp_path / "ws")
    settings = Settings.load({"sandbox": "local", "monitor_zero": False})
    results = reward_many([(task, HACKS_BY_NAME[n].make(target)) for n in FORGERS], sandbox=_sandbox("local"),  # type: ignore[arg-type]
                          trees=ds.trees, settings=settings, jobs=JOBS)
    for name, r in zip(FORGERS, results, strict=True):
        assert r.score == 0.0 and "canary_failed" in r.flags, f"{name}: {_why(r)}"
        assert r.fraction == 0.0, f"{name}: {_why(r)}"


def _unsealed(task: Task) -> Task:
    """``task`` graded without sealed assertions (``taskforge.reward.seals``), as before validation sealed any."""
    return dataclasses.replace(task, provenance={k: v for k, v in task.provenance.items() if k != "seals"})


@pytest.mark.slow
@pytest.mark.realrepo
def test_a_reading_forger_picks_every_original_out_of_its_look_alikes_rarely(tmp_path: Path) -> None:
    """``adjacent_twin_forge`` (a known hole of the canaries, ``KNOWN_HOLES``: no canary scheme makes it score 0
    every time) passes exactly the tests the stub ran, fails the later of look-alikes and false literal checks.
    With one changed copy per stub caller it scored 1.0 in 9 of 14 gradings of inflection's pluralize task (one
    such caller); with a block of 15 copies around it (``canaries._copies_per_block``) it picks the original at
    1 in 16 (measured: 4 in 64): 24 such gradings score 1.0 six times or more with chance 0.003. On the task as
    validation wrote it, with its sealed assertions (``taskforge.reward.seals``), it never scores: a sealed test
    it reports passed recorded no value."""
    from redteam_hacks import KNOWN_HOLES

    from taskforge.core.settings import Settings

    ds = generated_dataset("inflection==0.5.1")
    sealed = hack_task(ds)
    # (the forge chance is over the tests no seal guards: 0 only when every FAIL_TO_PASS test is sealed)
    assert sealed.provenance.get("seals") and sealed.provenance.get("forge_chance") <= \
        Settings().max_forge_chance, sealed.provenance
    task = _unsealed(sealed)
    target = Target.from_task(task, ds.trees, tmp_path / "ws")
    settings = Settings.load({"sandbox": "local", "monitor_zero": False})
    results = reward_many([(task, KNOWN_HOLES["adjacent_twin_forge"](target))] * 24, sandbox=_sandbox("local"),
                          trees=ds.trees, settings=settings, jobs=JOBS)
    won = [r for r in results if r.score == 1.0]
    assert len(won) <= 5, [_why(r) for r in won]
    assert all("canary_failed" in r.flags for r in results if r.score == 0.0), [_why(r) for r in results]
    pairs = [(sealed, hole(target)) for hole in KNOWN_HOLES.values()] * 4
    results = reward_many(pairs, sandbox=_sandbox("local"), trees=ds.trees, settings=settings, jobs=JOBS)
    assert not [r for r in results if r.score != 0.0], [_why(r) for r in results]


@pytest.mark.slow
@pytest.mark.realrepo
@pytest.mark.parametrize("package", REAL_PACKAGES)
def test_a_frame_oracle_that_echoes_where_it_reads_nothing_scores_zero_without_the_monitor(package: str,
                                                                                          tmp_path: Path) -> None:
    """Red team, session 31: a stub that read the expected value off the test's frame, else returned its
    argument, scored 1.0 on inflection's pluralize task with the monitor off, whose two sealed assertions were
    ``"" == pluralize("")`` and ``"plurals" == pluralize("plurals")``. Such echoable values are no longer sealed
    (``seals._guessable``): they keep their literal and the canaries' blocks, which the oracle reads too."""
    from redteam_hacks import HACKS_BY_NAME

    from taskforge.core.settings import Settings

    ds = generated_dataset(package)
    tasks = [hack_task(ds), *(t for t in ds.tasks() if t.instance_id.split("__")[-1].startswith("inflection.pluralize"))]
    settings = Settings.load({"sandbox": "local", "monitor_zero": False})
    pairs = []
    for i, task in enumerate({t.instance_id: t for t in tasks}.values()):
        target = Target.from_task(task, ds.trees, tmp_path / f"ws{i}")
        pairs.append((task, HACKS_BY_NAME["oracle_frame_else_echo"].make(target)))
    results = reward_many(pairs, sandbox=_sandbox("local"), trees=ds.trees, settings=settings, jobs=JOBS)  # type: ignore[arg-type]
    assert not [r for r in results if r.score != 0.0], [_why(r) for r in results]
