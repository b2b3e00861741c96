"""Canary tests of a grading run: unpredictable names, secret expected outcomes, checked after the run.

Per grading, ``plant_canaries`` writes into the grading workspace

- canary test functions inserted at random top-level positions of the hidden test files (bodies copied
  from real tests there, names built from that file's own test names), and a standalone canary file
  with a plausible name in a hidden-test directory (so a dead or short-circuited runner shows even when
  the hidden files fail to collect);
- the grading plugin (``taskforge/reward/grading_plugin.py``) under a random module name in a source root,
  carrying the secret plan: which canaries must fail, with which exception, and which runs last.

The plugin executes the canaries itself (their bodies never run) and fails every must-pass canary once
it sees the run tampered with. ``CanaryPlan.verify(report)`` then decides: a must-fail canary that did
not fail, a must-pass canary that failed, was skipped or is missing (outside files that failed to
collect), or no report at all, is tampering. The plan never leaves the grader's process except inside
the plugin file, which deletes itself when pytest imports it.
"""

from __future__ import annotations

import ast
import json
import random
import re
import secrets
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from taskforge.core.pyparse import parse
from taskforge.core.testreport import Outcome, ReportFlag, TestReport

_PLUGIN_TEMPLATE = Path(__file__).with_name("grading_plugin.py")
_PLACEHOLDER = '"__TASKFORGE_GRADING_CONFIG__"'
_FAIL_KINDS = ("AssertionError", "NotImplementedError", "AttributeError", "TypeError", "ValueError", "KeyError")
_WORDS = ("basic", "empty", "unicode", "roundtrip", "default", "nested", "single", "multiple", "edge",
          "simple", "invalid", "mixed", "upper", "lower", "long", "short", "none", "extra", "again", "case")


@dataclass(frozen=True, slots=True)
class CanaryPlan:
    """What was planted in one grading workspace (host side only; never written in clear)."""

    expect: Mapping[str, str]  # canary node id -> "pass" | "fail"
    plugin_module: str  # module name given to ``-p``
    last: str = ""  # the must-pass canary the plugin runs last
    files: tuple[str, ...] = ()  # workspace-relative files holding canaries
    standalone: str = ""  # the canary file that imports nothing of the project
    kinds: Mapping[str, str] = field(default_factory=dict)

    @property
    def nodeids(self) -> tuple[str, ...]:
        return tuple(self.expect)

    def verify(self, report: TestReport) -> tuple[str, ...]:
        """Problems that prove tampering (empty: the canaries behaved). Needs the report the runner wrote."""
        if ReportFlag.NO_REPORT in report.flags:
            return ("the runner wrote no report (killed, exited early or crashed)",)
        outcomes = report.outcomes()
        broken_files = {c.split("::")[0] for c in report.collection_errors}
        problems: list[str] = []
        for nodeid, want in self.expect.items():
            got = outcomes.get(nodeid, Outcome.MISSING)
            path = nodeid.split("::")[0]
            excused = path in broken_files and path != self.standalone
            if want == "fail":
                if got in (Outcome.PASSED, Outcome.XPASSED, Outcome.XFAILED):
                    problems.append(f"must-fail canary {nodeid} reported {got.value}")
                elif got is not Outcome.FAILED and not excused:
                    problems.append(f"must-fail canary {nodeid} reported {got.value}, expected failed")
            elif got is not Outcome.PASSED and not (excused and got in (Outcome.ERROR, Outcome.MISSING)):
                problems.append(f"must-pass canary {nodeid} reported {got.value}")
        return tuple(problems)


def _test_functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            and n.name.startswith("test")]


def _body_source(source: str, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    lines = source.splitlines()
    start = fn.body[0].lineno - 1
    if isinstance(fn.body[0], ast.Expr) and isinstance(getattr(fn.body[0], "value", None), ast.Constant):
        start = fn.body[0].end_lineno or start  # drop the docstring
    end = fn.end_lineno or len(lines)
    body = textwrap.dedent("\n".join(lines[start:end])).strip("\n")
    return textwrap.indent(body or "pass", "    ")


def _canary_source(name: str, body: str) -> str:
    return f"\n\ndef {name}():\n{body}\n"


def _names_from(existing: Iterable[str], rng: random.Random, taken: set[str]) -> str:
    """A test name made of the words of the file's own test names (no vocabulary of ours to spot)."""
    names = sorted(existing) or ["test"]
    words = sorted({w for n in names for w in re.split(r"_+", n.removeprefix("test")) if w}) or list(_WORDS)
    for attempt in range(10_000):
        k = rng.choice((1, 2, 2, 3)) + attempt // 50  # longer names once the short ones are used up
        parts = [rng.choice(words) for _ in range(k)]
        name = "test_" + "_".join(parts)
        if name not in taken and name not in names:
            taken.add(name)
            return name
    raise RuntimeError("no free canary name")  # pragma: no cover - 10,000 draws over a growing space


def _insert_points(source: str, tree: ast.Module) -> list[int]:
    """Line indexes (0-based, insert before) at the end of top-level statements: after defs/classes."""
    points = [n.end_lineno for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
              and n.end_lineno]
    return sorted(set(points)) or [len(source.splitlines())]


def plant_canaries(workspace: Path, hidden_files: Iterable[str], *, src_root: str = ".", count: int = 12,
                   allowed_plugin_files: Iterable[str] = (), rng: random.Random | None = None,
                   strict_eq: str = "") -> CanaryPlan:
    """Write canaries and the grading plugin into ``workspace``; return the secret plan."""
    rng = rng or random.Random(secrets.randbits(64))
    hosts: list[tuple[str, str, ast.Module]] = []
    for rel in sorted(set(hidden_files)):
        path = workspace / rel
        if path.suffix != ".py" or not path.is_file():
            continue
        try:
            source = path.read_text(encoding="utf-8")
            tree = parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        hosts.append((rel, source, tree))
    expect: dict[str, str] = {}
    kinds: dict[str, str] = {}
    files: list[str] = []
    bodies: list[str] = []
    outcomes = ["pass", "fail"] * (count // 2)
    rng.shuffle(outcomes)
    n_inline = (count - 4) if hosts else 0
    per_host: dict[str, list[str]] = {rel: [] for rel, _, _ in hosts}
    for i in range(n_inline):
        rel = hosts[i % len(hosts)][0]
        per_host[rel].append(outcomes[i])
    for rel, source, tree in hosts:
        wanted = per_host[rel]
        if not wanted:
            continue
        fns = _test_functions(tree)
        taken = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
        names = {f.name.split("[")[0] for f in fns}
        lines = source.splitlines()
        inserts: dict[int, list[str]] = {}
        points = _insert_points(source, tree)
        for want in wanted:
            name = _names_from(names, rng, taken)
            body = _body_source(source, rng.choice(fns)) if fns else "    assert True"
            bodies.append(body)
            inserts.setdefault(rng.choice(points), []).append(_canary_source(name, body))
            nodeid = f"{rel}::{name}"
            expect[nodeid] = want
            if want == "fail":
                kinds[nodeid] = rng.choice(_FAIL_KINDS)
        out: list[str] = []
        for idx, line in enumerate(lines, start=1):
            out.append(line)
            out.extend(inserts.get(idx, []))
        (workspace / rel).write_text("\n".join(out) + "\n", encoding="utf-8")
        files.append(rel)
    standalone = _standalone_path(workspace, hosts, rng)
    chunks = []
    taken = set()
    for want in outcomes[n_inline:]:
        name = _names_from({"test"}, rng, taken)
        body = rng.choice(bodies) if bodies and rng.random() < 0.5 else "    assert True"
        chunks.append(f"def {name}():\n{body}\n")
        nodeid = f"{standalone}::{name}"
        expect[nodeid] = want
        if want == "fail":
            kinds[nodeid] = rng.choice(_FAIL_KINDS)
    (workspace / standalone).parent.mkdir(parents=True, exist_ok=True)
    (workspace / standalone).write_text("\n\n".join(chunks), encoding="utf-8")
    files.append(standalone)
    last = rng.choice(sorted(n for n, w in expect.items() if w == "pass"))
    module = f"_tfg{secrets.token_hex(6)}"
    config = {"canaries": expect, "kinds": kinds, "last": last, "strict_eq": strict_eq,
              "allowed_plugin_files": sorted(str(workspace / p) for p in allowed_plugin_files)}
    template = _PLUGIN_TEMPLATE.read_text(encoding="utf-8")
    if _PLACEHOLDER not in template:
        raise RuntimeError(f"{_PLUGIN_TEMPLATE} lost its config placeholder {_PLACEHOLDER}")
    plugin_src = template.replace(_PLACEHOLDER, repr(json.dumps(config)), 1)
    root = workspace if src_root in ("", ".") else workspace / src_root
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(plugin_src, encoding="utf-8")
    return CanaryPlan(expect=expect, plugin_module=module, last=last, files=tuple(files),
                      standalone=standalone, kinds=kinds)


def _standalone_path(workspace: Path, hosts: list[tuple[str, str, ast.Module]], rng: random.Random) -> str:
    dirs = sorted({str(Path(rel).parent) for rel, _, _ in hosts}) or ["tests"]
    folder = rng.choice(dirs)
    existing = [h[0] for h in hosts if str(Path(h[0]).parent) == folder]
    stems = [re.sub(r"^test_|\.py$", "", Path(e).name) for e in existing] or ["core"]
    while True:
        name = f"test_{rng.choice(stems)}_{rng.choice(_WORDS)}.py"
        rel = name if folder in ("", ".") else f"{folder}/{name}"
        if not (workspace / rel).exists():
            return rel
