"""Hypothesis strategies for taskforge value types (reuse them: ``from tests.strategies import tasks``).

Values are the shapes the pipeline really produces, with hostile text (unicode, newlines, NULs,
quotes) wherever a string can hold one. Floats are finite or infinite but never NaN (NaN != NaN
would make equality-based round trips meaningless), integers fit in int64 where parquet stores them
as int64.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hypothesis import strategies as st

from taskforge.core.environment import EnvSpec
from taskforge.core.task import AuditResult, Difficulty, LeakHit, Task, ValidationRun

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
SMALL = st.integers(min_value=0, max_value=10_000)
FLOATS = st.floats(allow_nan=False)
text = st.text(max_size=40)
names = st.text(alphabet=st.characters(categories=("L", "N"), include_characters="._-"), min_size=1, max_size=20)
nodeids = st.builds(lambda f, n: f"tests/{f}.py::test_{n}", names, names)
strings = st.lists(text, max_size=4).map(tuple)

json_scalars = st.none() | st.booleans() | INT64 | FLOATS | text
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=8,
)

env_specs = st.builds(
    EnvSpec,
    project_name=names,
    python=st.sampled_from(["3.10", "3.11", "3.12"]),
    install_target=st.sampled_from(["", ".", ".[tests]", ".[dev,test]"]),
    requirements=strings,
    src_roots=st.lists(names, min_size=1, max_size=2).map(tuple),
    package_dirs=strings,
    test_paths=st.lists(names, min_size=1, max_size=2).map(tuple),
    pytest_args=strings,
    notes=strings,
)

difficulties = st.builds(
    Difficulty,
    tier=st.integers(0, 2),
    lines_deleted=INT64,
    statements_deleted=INT64,
    entities_deleted=INT64,
    complexity=INT64,
    fan_in=INT64,
    fan_out=INT64,
    files_touched=INT64,
    fail_to_pass=INT64,
    score=FLOATS,
)

validation_runs = st.builds(
    ValidationRun,
    check=st.sampled_from(["p2p_broken", "f2p_original", "f2p_broken", "gold"]) | text,
    repeat=SMALL,
    passed=st.booleans(),
    outcomes=st.dictionaries(nodeids, st.sampled_from(["passed", "failed", "error", "missing"]), max_size=4),
    seconds=FLOATS,
)

audit_results = st.builds(
    AuditResult,
    channels=strings,
    hits=st.lists(st.builds(LeakHit, channel=text, path=text, evidence=text), max_size=3).map(tuple),
    fingerprints=SMALL,
    seconds=FLOATS,
)

tasks = st.builds(
    Task,
    instance_id=names,
    repo=names,
    source=text,
    base_commit=st.text(alphabet="0123456789abcdef", min_size=40, max_size=40),
    version=text,
    created_at=text,
    strategy=st.sampled_from(["stub", "delete", "module"]),
    entities=strings,
    setup_patch=st.text(),
    patch=st.text(),
    test_patch=st.text(),
    problem_statement=st.text(),
    fail_to_pass=st.lists(nodeids, max_size=5).map(tuple),
    pass_to_pass=st.lists(nodeids, max_size=5).map(tuple),
    env_spec=env_specs,
    difficulty=difficulties,
    env_frozen=st.lists(st.builds(lambda n, v: f"{n}=={v}", names, names), max_size=4).map(tuple),
    image_name=text,
    validation=st.lists(validation_runs, max_size=3).map(tuple),
    audit=audit_results,
    provenance=st.dictionaries(text, json_values, max_size=4),
)


# -- concrete examples ------------------------------------------------------------------------------
def sample_task(i: int, repo: str = "demo", *, strategy: str = "delete", score: float | None = None,
                patch_bytes: int = 200) -> Task:
    """A deterministic, plausible task number ``i`` (distinct instance id and content hash per ``i``)."""
    body = "".join(f"+    x{j} = {i} * {j}\n" for j in range(max(1, patch_bytes // 20)))
    return Task(
        instance_id=f"{repo}__{strategy}__mod.func{i}-{i:08x}",
        repo=repo,
        source=f"pypi:{repo}==1.0",
        base_commit=f"{i:040x}",
        version="1.0",
        created_at="2026-11-30T00:00:00+00:00",
        strategy=strategy,
        entities=(f"{repo}.mod.func{i}",),
        setup_patch=f"--- a/{repo}/mod.py\n+++ b/{repo}/mod.py\n@@ -1,2 +1,1 @@\n-def func{i}(): ...\n",
        patch=f"--- a/{repo}/mod.py\n+++ b/{repo}/mod.py\n@@ -1,1 +1,2 @@\n+def func{i}():\n{body}",
        test_patch=f"--- a/tests/test_mod.py\n+++ b/tests/test_mod.py\n@@ -0,0 +1,2 @@\n+def test_func{i}(): ...\n",
        problem_statement=f"Implement `func{i}` in `{repo}.mod`.",
        fail_to_pass=(f"tests/test_mod.py::test_func{i}",),
        pass_to_pass=("tests/test_mod.py::test_other",),
        env_spec=EnvSpec(project_name=repo, python="3.11", install_target="."),
        difficulty=Difficulty(tier=i % 3, lines_deleted=3 + i % 7, statements_deleted=2, entities_deleted=1,
                              complexity=1 + i % 4, fan_in=i % 2, fan_out=3, files_touched=1, fail_to_pass=1,
                              score=(i * 0.137) % 1.0 if score is None else score),
        env_frozen=("pytest==8.3.3",),
        validation=(ValidationRun("gold", 0, True, {f"tests/test_mod.py::test_func{i}": "passed"}, 0.5),),
        audit=AuditResult(channels=("workspace",), fingerprints=4, seconds=0.1),
        provenance={"taskforge_version": "0.1.0", "generator": "test", "seed": i},
    )


MINI_ORIGINAL = {
    "pyproject.toml": '[project]\nname = "mini"\nversion = "1.0"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
    "mini/__init__.py": "from mini.calc import add, mul\n",
    "mini/calc.py": (
        'def add(a, b):\n    """Return a + b."""\n    return a + b\n\n\n'
        'def mul(a, b):\n    """Return a * b for a non-negative integer b."""\n    result = 0\n'
        "    for _ in range(b):\n        result = add(result, a)\n    return result\n"
    ),
    "tests/test_calc.py": "from mini.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "tests/test_mul.py": (
        "from mini.calc import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n\n\n"
        "def test_mul_zero():\n    assert mul(7, 0) == 0\n"
    ),
}
MINI_BROKEN = {
    **{k: v for k, v in MINI_ORIGINAL.items() if k != "tests/test_mul.py"},
    "mini/__init__.py": "from mini.calc import add\n",
    "mini/calc.py": 'def add(a, b):\n    """Return a + b."""\n    return a + b\n',
}


def unified_diff(old: dict[str, str], new: dict[str, str], paths: list[str] | None = None) -> str:
    """A git-style unified diff (``a/`` ``b/`` prefixes, /dev/null for added or removed files)."""
    import difflib

    out = []
    for path in sorted(paths if paths is not None else set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        out += difflib.unified_diff((a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True),
                                    fromfile=f"a/{path}" if a is not None else "/dev/null",
                                    tofile=f"b/{path}" if b is not None else "/dev/null")
    return "".join(out)


def mini_task(tmp_dir: Path) -> tuple[Task, Path]:
    """A real, runnable task: ``mini.calc.mul`` deleted; returns it and the original tree it came from."""
    src = tmp_dir / "mini-original"
    for rel, text in MINI_ORIGINAL.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    tests = ["tests/test_mul.py"]
    code = [p for p in MINI_ORIGINAL if p not in tests]
    task = sample_task(0, repo="mini")
    return dataclasses.replace(
        task,
        instance_id="mini__delete__mini.calc.mul-1a2b3c4d",
        source="local:mini",
        base_commit="c0ffee" + "0" * 34,
        entities=("mini.calc.mul",),
        setup_patch=unified_diff(MINI_ORIGINAL, MINI_BROKEN),
        patch=unified_diff(MINI_BROKEN, MINI_ORIGINAL, code),
        test_patch=unified_diff(MINI_BROKEN, MINI_ORIGINAL, tests),
        problem_statement="Add `mini.calc.mul(a, b)`: multiply `a` by a non-negative integer `b` using "
                          "repeated addition, and export it from `mini`.",
        fail_to_pass=("tests/test_mul.py::test_mul", "tests/test_mul.py::test_mul_zero"),
        pass_to_pass=("tests/test_calc.py::test_add",),
        env_spec=EnvSpec(project_name="mini", python="3.11", install_target=".", package_dirs=("mini",),
                         test_paths=("tests",)),
        env_frozen=("pytest==8.3.3", "mini==1.0"),
    ), src
