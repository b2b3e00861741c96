"""Choose ONE set of test requirements for the running Python, never a union of several.

A repository often declares its test dependencies more than once: a PEP 735 dependency group, the tox
environment CI runs, a noxfile, and requirement files, some of them locks compiled for another Python
(jinja2 3.1.6 ships ``requirements/tests.txt`` for 3.13 and ``requirements/tests37.txt`` for 3.7; their
union asks for ``pytest==8.3.4`` and ``pytest==7.4.4`` at once). ``choose_requirement_set`` takes the
first source that exists, in this order of trust, and within it the variant for ``python``:

1. ``[dependency-groups]`` of pyproject.toml (PEP 735): ``test``, ``tests``, ``testing``, then ``dev``...;
2. the tox environment of ``python`` (``[testenv:py311]`` or a section naming ``py311``/``py3.11``), else
   ``[testenv]``: its ``deps`` (``-r FILE`` followed; a factor-conditional line is kept when its condition
   holds for the ``envlist`` env that tests under ``python``, e.g. ``py311-unit`` for ``unit-!pypy: dep``);
3. one requirement file: the one named for ``python`` (``tests311.txt``, ``tests-py3.11.txt``), else the
   unversioned one with the shortest name; files named for another Python are never read;
4. the dependencies of hatch's test environment (``[tool.hatch.envs.hatch-test]``, ``test``..., ``default``,
   ``dev``), lint, type-check and build tools left out;
5. ``session.install(...)`` calls of ``noxfile.py``.

The others are named in the notes. When the chosen set cannot be installed, the sandbox falls back step by
step (``sandboxes/install_plan.py``).
"""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GROUP_NAMES = ("test", "tests", "testing", "dev", "develop", "development")
FILE_PATTERNS = ("requirements/test*.txt", "requirements/tests*.txt", "requirements-test*.txt",
                 "test-requirements*.txt", "test_requirements*.txt", "requirements_test*.txt",
                 "tests/requirements*.txt", "requirements/testing*.txt", "requirements-testing*.txt")
FALLBACK_PATTERNS = ("requirements/test*.in", "requirements-test*.in", "requirements/dev.txt",
                     "requirements-dev.txt", "dev-requirements.txt")
_PY_SUFFIX = re.compile(r"(?:[-_.]?py)?[-_.]?(3)\.?(\d{1,2})$")


@dataclass(frozen=True, slots=True)
class RequirementSet:
    """One declared set of test requirements and where it came from (``origin``, shown to the user)."""

    origin: str
    requirements: tuple[str, ...]


def choose_requirement_set(repo: Path, pyproject: dict[str, Any], tox: configparser.ConfigParser,
                           nox_text: str, python: str) -> tuple[RequirementSet | None, list[str]]:
    """The one requirement set for ``python`` and the notes saying what was chosen and what was left."""
    found = [s for s in (_dependency_group(pyproject), _tox_deps(repo, tox, python),
                         _requirement_file(repo, python), _hatch_env(pyproject), _nox_installs(nox_text)) if s is not None]
    if not found:
        return None, []
    chosen, *others = found
    notes = [f"requirements: {chosen.origin} ({len(chosen.requirements)} entries) is the one set for "
             f"Python {python}"]
    if others:
        notes.append("requirements: not combined with " + ", ".join(o.origin for o in others) +
                     " (one consistent set; a union of sets pinned for different Pythons cannot resolve)")
    return chosen, notes


def python_tag(name: str) -> str:
    """``"3.7"`` for ``tests37.txt`` / ``tests-py3.7.txt``; ``""`` when the name names no Python."""
    stem = name.rsplit("/", 1)[-1].split(".txt")[0].split(".in")[0]
    m = _PY_SUFFIX.search(stem)
    return f"{m.group(1)}.{m.group(2)}" if m else ""


def read_requirements(path: Path, seen: set[Path] | None = None) -> list[str]:
    """The requirement lines of ``path``, ``-r`` includes followed; options, paths and URLs left out."""
    seen = set() if seen is None else seen
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    out: list[str] = []
    for raw in path.read_text(errors="replace").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            out.extend(read_requirements(path.parent / line.split(None, 1)[1], seen))
        elif line.startswith("-") or line.startswith((".", "/")) or "://" in line:
            continue  # -c, -e ., local paths, index options, URLs: not portable requirements
        else:
            out.append(line.split(";", 1)[0].strip() if "python_version" not in line else line)
    return out


def requirement_files(repo: Path) -> list[str]:
    """Every test requirement file of ``repo`` (for the metadata digest), most specific pattern first."""
    found: list[str] = []
    for pat in FILE_PATTERNS:
        found += [rel for p in sorted(repo.glob(pat)) if (rel := p.relative_to(repo).as_posix()) not in found]
    if not found:
        for pat in FALLBACK_PATTERNS:
            found += [p.relative_to(repo).as_posix() for p in sorted(repo.glob(pat))]
            if found:
                break
    return found


# --- the sources, each returning one set or None -----------------------------------------------

def _dependency_group(pyproject: dict[str, Any]) -> RequirementSet | None:
    groups = pyproject.get("dependency-groups", {})
    for g in GROUP_NAMES:
        if g in groups:
            return RequirementSet(f"dependency-group {g!r} of pyproject.toml", tuple(_resolve_group(groups, g, set())))
    return None


HATCH_ENVS = ("hatch-test", "test", "tests", "testing", "default", "dev", "develop", "development")
_NOT_TEST_TOOLS = frozenset({"mypy", "ruff", "black", "isort", "flake8", "pylint", "pyright", "build", "twine",
                             "pre-commit", "tox", "nox", "hatch", "sphinx", "mkdocs", "coveralls", "codecov",
                             "pyspelling", "bandit", "types-setuptools"})


def _hatch_env(pyproject: dict[str, Any]) -> RequirementSet | None:
    """The dependencies of hatch's test environment (``[tool.hatch.envs.<name>]``: ``hatch-test``, ``test``...,
    ``default``, ``dev``), lint/type-check/build tools left out (soupsieve 4.1.4 declares beautifulsoup4 and lxml
    only in ``[tool.hatch.envs.dev]``; without them 86 of its test files did not collect)."""
    envs = pyproject.get("tool", {}).get("hatch", {}).get("envs", {})
    if not isinstance(envs, dict):
        return None
    for name in HATCH_ENVS:
        env = envs.get(name)
        if not isinstance(env, dict):
            continue
        deps = [d for key in ("dependencies", "extra-dependencies") for d in env.get(key, []) if isinstance(d, str)]
        deps = [d for d in deps if not d.startswith(("-", ".", "/")) and "://" not in d and "{" not in d
                and not (_req_base(d) in _NOT_TEST_TOOLS or _req_base(d).startswith(("types-", "mkdocs", "sphinx")))]
        if deps:
            return RequirementSet(f"hatch environment {name!r} of pyproject.toml", tuple(dict.fromkeys(deps)))
    return None


def _req_base(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _resolve_group(groups: dict[str, Any], name: str, seen: set[str]) -> list[str]:
    if name in seen:
        return []
    seen.add(name)
    out: list[str] = []
    for item in groups.get(name, []):
        if isinstance(item, dict) and "include-group" in item:
            out.extend(_resolve_group(groups, item["include-group"], seen))
        elif isinstance(item, str):
            out.append(item)
    return out


_NOT_TEST_FACTORS = frozenset({"lint", "linting", "mypy", "typing", "types", "type", "docs", "doc", "doctest",
                               "flake8", "style", "pre-commit", "precommit", "format", "black", "isort",
                               "pylint", "ruff", "pyright", "build", "release", "publish", "coverage",
                               "report", "clean", "check", "checks", "pep8", "bandit", "spell", "benchmark",
                               "bench", "perf", "twine", "packaging", "readme", "manifest"})
_TEST_FACTORS = ("unit", "test", "tests", "pytest", "testing", "unittests")


def expand_envlist(text: str) -> list[str]:
    """tox env names of an ``envlist`` value, brace groups expanded (``py{310,311}-{unit,doctest}``)."""
    names: list[str] = []
    for part in re.split(r",(?![^{]*\})|\n", text):
        part = part.strip()
        if not part or part.startswith("#"):
            continue
        todo = [part]
        while todo:
            name = todo.pop(0)
            m = re.search(r"\{([^{}]*)\}", name)
            if m is None:
                names.append(name)
                continue
            todo[:0] = [name[:m.start()] + alt.strip() + name[m.end():] for alt in m.group(1).split(",")]
    return list(dict.fromkeys(names))


def tox_factors(tox: configparser.ConfigParser, python: str) -> set[str]:
    """The factors of the tox env that runs the tests under ``python``: from ``envlist``, an env that
    names ``python`` (``py311-unit``), preferring a test factor (``unit``, ``tests``) and avoiding lint,
    type-check and docs ones; its factors, plus ``python``'s own names (``py311``, ``py3.11``, ``py3``)."""
    major, _, minor = python.partition(".")
    own = {f"py{major}{minor}", f"py{major}.{minor}", f"py{major}"}
    envlist = tox.get("tox", "envlist", fallback="") or tox.get("tox", "env_list", fallback="")
    envs = [e.split("-") for e in expand_envlist(envlist)]
    ours = [fs for fs in envs if own & set(fs) and not _NOT_TEST_FACTORS & set(fs)]
    best = next((fs for fs in ours if set(_TEST_FACTORS) & set(fs)), ours[0] if ours else [])
    return own | set(best)


def factor_condition_holds(cond: str, factors: set[str]) -> bool:
    """A tox factor condition: ``,`` is or, ``-`` is and, ``!`` is not (``unit-!py315t``, ``py37,py38``); brace
    groups expand first (python-dotenv 1.2.4: ``py{310,311,312}: ipython``)."""
    return any(all((f[1:] not in factors) if f.startswith("!") else (f in factors)
                   for f in alt.strip().split("-") if f)
               for alt in expand_envlist(cond))


def _tox_section(tox: configparser.ConfigParser, python: str, option: str) -> str:
    """The tox section of ``python`` that sets ``option`` (``[testenv:py311]``), else ``[testenv]``, else ""."""
    major, _, minor = python.partition(".")
    own = {f"py{major}{minor}", f"py{major}.{minor}", f"py{major}"}
    section = next((s for s in tox.sections() if s.startswith("testenv:") and tox.has_option(s, option)
                    and own & {f.strip() for f in s.split(":", 1)[1].split(",")}), "")
    return section or ("testenv" if tox.has_option("testenv", option) else "")


def _tox_deps(repo: Path, tox: configparser.ConfigParser, python: str) -> RequirementSet | None:
    factors = tox_factors(tox, python)
    section = _tox_section(tox, python, "deps")
    if not section:
        return None
    deps: list[str] = []
    for raw in tox.get(section, "deps").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if ":" in line and not line.startswith(("-", "#")) and "://" not in line:
            cond, _, line = line.partition(":")  # tox factor condition: "py37,py38: dep", "unit-!pypy: dep"
            if not factor_condition_holds(cond, factors):
                continue
            line = line.strip()
        if not line or line.startswith("#") or "{" in line:
            continue
        if line.startswith(("-r", "--requirement")):
            target = line.split(None, 1)[1] if " " in line else line[2:]
            deps += read_requirements(repo / target.strip())
        elif not line.startswith(("-", ".", "/")):
            deps.append(line)
    if not deps:
        return None
    return RequirementSet(f"tox.ini [{section}] deps", tuple(dict.fromkeys(deps)))


_PYTEST_COMMAND = re.compile(r"^(?:\S*/)?(?:pytest|py\.test|python3?(?:\.\d+)? -m pytest|coverage run -m pytest)\s(.*)$")


def tox_test_paths(repo: Path, tox: configparser.ConfigParser, python: str) -> tuple[str, ...]:
    """The paths the tox environment of ``python`` gives pytest (``commands = unit: pytest tests
    examples/tiny/tests {posargs}`` -> ``("tests", "examples/tiny/tests")``): the directories and ``.py``
    files among its arguments that exist in ``repo``; ``()`` when no command runs pytest with one. Factor
    conditions are read as for ``deps``."""
    factors = tox_factors(tox, python)
    section = _tox_section(tox, python, "commands")
    if not section:
        return ()
    paths: list[str] = []
    for raw in tox.get(section, "commands", raw=True).splitlines():
        line = raw.split(" #", 1)[0].strip()
        head, sep, rest = line.partition(":")
        if sep and rest[:1] == " " and re.fullmatch(r"[\w.,!{}-]+", head.strip()):
            if not factor_condition_holds(head, factors):
                continue
            line = rest.strip()
        m = _PYTEST_COMMAND.match(line)
        if m is None:
            continue
        args = m.group(1).split()
        if "--pyargs" in args:  # names are importable packages, not paths
            continue
        skip_next = False
        for arg in args:
            if skip_next:
                skip_next = False
                continue
            if arg.startswith("-"):
                skip_next = arg in ("-p", "-k", "-m", "-c", "-o", "--rootdir", "--ignore", "--deselect")
                continue
            rel = arg.split("::", 1)[0].strip("'\"").rstrip("/")
            if rel and "{" not in rel and not rel.startswith("/") and ".." not in rel.split("/") \
                    and ((repo / rel).is_dir() or (rel.endswith(".py") and (repo / rel).is_file())):
                paths.append(rel)  # not natsort's ``pytest README.rst``: a doctest command, not the suite
    return tuple(dict.fromkeys(paths))


def _requirement_file(repo: Path, python: str) -> RequirementSet | None:
    files = [f for f in requirement_files(repo)]
    if not files:
        return None
    exact = [f for f in files if python_tag(f) == python]
    generic = sorted((f for f in files if not python_tag(f)), key=lambda f: (len(Path(f).name), f))
    chosen = (exact or generic or [""])[0]
    if not chosen:
        return None  # only files for other Pythons
    skipped = [f for f in files if f != chosen]
    origin = chosen + (f" (not {', '.join(skipped)})" if skipped else "")
    return RequirementSet(origin, tuple(read_requirements(repo / chosen)))


def _nox_installs(nox: str) -> RequirementSet | None:
    deps: list[str] = []
    for call in re.findall(r"session\.install\(([^)]*)\)", nox):
        for dep in re.findall(r"""['"]([A-Za-z0-9][A-Za-z0-9._\-\[\],<>=!~ ]*)['"]""", call):
            if not dep.startswith((".", "-")) and dep != "pip":
                deps.append(dep)
    return RequirementSet("noxfile.py session.install", tuple(dict.fromkeys(deps))) if deps else None
