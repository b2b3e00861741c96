"""Detect how to install a repository and run its tests: an ``EnvSpec``, with a note per field.

Read, in order of trust: ``pyproject.toml`` (``[project]``, optional-dependencies, dependency-groups,
``[tool.pytest...]``), ``setup.cfg``, ``setup.py`` (literals, read with ast, never executed:
``generators/setup_py.py``), ``pytest.ini`` /
``tox.ini``, ONE requirement set for the running Python (``generators/requirement_sets.py``), and finally the imports of the test
files themselves: a test dependency that the sdist forgot to declare (``hypothesis``, ``freezegun``, a
pytest plugin) is found there and added, or reported in the notes when it cannot be mapped. An extra is
also installed when the tests import its modules (every extra whose modules a test file imports at its top,
directly or through the package's modules; up to 3 others), or when the package's own code imports them
without declaring them (jsonschema's ``format``: ``generators/optional_imports.py``).
"""

from __future__ import annotations

import ast
import configparser
import fnmatch
import hashlib
import os
import re
import shlex
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from generators.optional_imports import (
    dist_keys,
    dist_provides,
    import_time_imports,
    pick_extras,
    scan_package_imports,
)
from generators.requirement_sets import choose_requirement_set, requirement_files, tox_test_paths
from generators.setup_py import setup_py_extras, setup_py_name_constant
from taskforge.core import pyparse
from taskforge.core.environment import EnvSpec, normalise_name

TEST_EXTRAS = ("test", "tests", "testing")
DEV_EXTRAS = ("dev", "develop", "development")
_NO_TEST_EXTRAS = frozenset({"docs", "doc", "lint", "typing", "mypy", "build", "release", "all"})
# extras that swap the project's own Python code for a compiled one (semver 3.1.2's `native` Rust parser, which
# `Version.parse` tries before its regex): installed, they take the suite away from the code tasks are made of.
# natsort 8.4.0's `icu`: PyICU's collator replaces its locale-module code (compat/locale.py); an sdist that
# builds against the system's ICU headers (3 min here, and no build in a slim image), and plain passes 274 either way
_ACCELERATOR_EXTRAS = frozenset({"native", "speedups", "speedup", "speed", "fast", "accel", "accelerate",
                                 "accelerated", "c", "cext", "cython", "rust", "compiled", "binary", "performance",
                                 "icu"})
_SKIP_DIRS = {"tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks", "bench",
              "scripts", "tools", "build", "dist", "site-packages", "typing-examples", "changelog.d"}
_SKIP_MODULES = {"setup", "conftest", "noxfile", "fabfile", "tasks", "manage", "runtests", "conf"}
# import name -> distribution, for test dependencies often missing from an sdist's metadata
KNOWN_TEST_IMPORTS = {
    "hypothesis": "hypothesis", "pytest_mock": "pytest-mock", "freezegun": "freezegun",
    "pympler": "pympler", "cloudpickle": "cloudpickle", "yaml": "PyYAML", "dateutil": "python-dateutil",
    "mock": "mock", "responses": "responses", "requests": "requests", "toml": "toml", "tomli": "tomli",
    "pytz": "pytz", "six": "six", "numpy": "numpy", "simplejson": "simplejson", "typing_extensions":
    "typing-extensions", "time_machine": "time-machine", "pytest_benchmark": "pytest-benchmark",
    "pytest_asyncio": "pytest-asyncio", "trio": "trio", "anyio": "anyio", "attr": "attrs",
    "attrs": "attrs", "babel": "Babel", "jinja2": "Jinja2", "markupsafe": "MarkupSafe",
    "werkzeug": "Werkzeug", "click": "click", "testpath": "testpath", "pexpect": "pexpect",
    "docutils": "docutils", "pygments": "Pygments", "packaging": "packaging", "dirty_equals":
    "dirty-equals", "inline_snapshot": "inline-snapshot", "syrupy": "syrupy", "faker": "Faker",
    "bson": "pymongo",  # cattrs 26.2.1: tests/test_preconf.py imports bson; its `bson` extra is pymongo
    # soupsieve 4.1.4's tests import bs4 and lxml and declare them only in a hatch env (held-out probe B)
    "bs4": "beautifulsoup4", "lxml": "lxml", "html5lib": "html5lib", "PIL": "Pillow", "pandas": "pandas",
    "scipy": "scipy", "sqlalchemy": "SQLAlchemy", "httpx": "httpx", "aiohttp": "aiohttp", "flask": "Flask",
    "cryptography": "cryptography", "jwt": "PyJWT", "msgpack": "msgpack", "ujson": "ujson", "orjson": "orjson",
    "pydantic": "pydantic", "tornado": "tornado", "psutil": "psutil", "IPython": "ipython",
    "parameterized": "parameterized", "ddt": "ddt", "testfixtures": "testfixtures", "pyfakefs": "pyfakefs",
    "requests_mock": "requests-mock", "respx": "respx", "pytest_httpserver": "pytest-httpserver",
    "pytest_timeout": "pytest-timeout", "xdist": "pytest-xdist", "hamcrest": "PyHamcrest", "sortedcontainers":
    "sortedcontainers", "more_itertools": "more-itertools", "defusedxml": "defusedxml", "regex": "regex",
    "rich": "rich", "colorama": "colorama", "tabulate": "tabulate", "markdown": "Markdown", "idna": "idna",
    "certifi": "certifi", "urllib3": "urllib3", "chardet": "chardet", "charset_normalizer": "charset-normalizer",
    "multidict": "multidict", "yarl": "yarl", "wrapt": "wrapt", "decorator": "decorator", "toolz": "toolz",
    "cachetools": "cachetools", "jsonschema": "jsonschema", "dotenv": "python-dotenv", "slugify": "python-slugify",
    "nacl": "PyNaCl", "OpenSSL": "pyOpenSSL", "Crypto": "pycryptodome", "serial": "pyserial", "whatever": "whatever",
    "pytest_cov": "pytest-cov", "coverage": "coverage", "sh": "sh", "uvloop": "uvloop",
    # import names that are not their distribution's name (a same-name guess would install the wrong one)
    "sklearn": "scikit-learn", "skimage": "scikit-image", "cv2": "opencv-python-headless", "zmq": "pyzmq",
    "Bio": "biopython", "dns": "dnspython", "magic": "python-magic", "docx": "python-docx", "nose2": "nose2",
    "nose": "nose", "fitz": "PyMuPDF", "gi": "PyGObject", "usb": "pyusb", "jose": "python-jose",
}
# Python 2 modules that test files still import, behind a try, as fallbacks: never a distribution to guess
_PYTHON2_MODULES = frozenset({
    "StringIO", "cStringIO", "cPickle", "urllib2", "urlparse", "ConfigParser", "Queue", "HTMLParser", "httplib",
    "__builtin__", "commands", "Tkinter", "cookielib", "SocketServer", "xmlrpclib", "BaseHTTPServer",
    "SimpleHTTPServer", "thread", "dummy_thread", "copy_reg", "repr", "anydbm", "htmlentitydefs", "md5", "sha",
    "sets", "exceptions", "new", "UserDict", "UserList", "UserString", "itertools2", "future_builtins"})
# pytest fixture name -> plugin distribution that provides it
KNOWN_FIXTURES = {"mocker": "pytest-mock", "benchmark": "pytest-benchmark", "freezer": "pytest-freezer",
                  "httpserver": "pytest-httpserver", "snapshot": "syrupy"}
# addopts prefixes our runner replaces or cannot honour; each is dropped with its value
# other distributions that provide the same fixture: declaring one of them is enough (wcwidth declares
# pytest-codspeed; adding pytest-benchmark too made its ``benchmark`` fixture time 50 tests for 2.5 s each)
_FIXTURE_ALTERNATIVES = {"benchmark": {"pytest-codspeed"}}
_DROP_OPTS = ("--cov", "--no-cov", "-n", "--numprocesses", "--dist", "--maxprocesses", "-p", "--benchmark",
              "--junitxml", "--junit-xml", "--html", "--lf", "--ff", "--sw", "--stepwise", "--timeout",
              "--reruns", "--basetemp", "--codspeed")
_OPTS_WITH_VALUE = {"-n", "--numprocesses", "--dist", "--maxprocesses", "-p", "--cov", "--cov-report",
                    "--cov-config", "--cov-fail-under", "--junitxml", "--html", "--timeout", "--reruns",
                    "--basetemp"}


def detect_env(repo: Path, *, python: str = "3.11", name_hint: str = "") -> EnvSpec:
    """Detect the ``EnvSpec`` of the repository at ``repo`` (read only)."""
    repo = Path(repo)
    notes: list[str] = []
    pyproject = _read_toml(repo / "pyproject.toml")
    setup_cfg = _read_ini(repo / "setup.cfg")
    tox_ini = _read_ini(repo / "tox.ini")
    setup_py = _read_text(repo / "setup.py")

    name, why = _project_name(pyproject, setup_cfg, setup_py, name_hint or repo.name)
    notes.append(f"project_name: {why}")

    extras_available = _extras(pyproject, setup_cfg, setup_py, _read_text(repo / "PKG-INFO"))
    installable = bool(pyproject.get("build-system") or pyproject.get("project") or setup_py or
                       setup_cfg.has_section("metadata"))
    chosen = [e for e in TEST_EXTRAS if e in extras_available] or [e for e in DEV_EXTRAS
                                                                    if e in extras_available][:1]
    if installable:
        install_target = f".[{','.join(chosen)}]" if chosen else "."
        notes.append(f"install_target: {install_target!r} (extras found: {sorted(extras_available) or 'none'})")
    else:
        install_target = ""
        notes.append("install_target: '' (no pyproject build info, setup.py or setup.cfg [metadata])")

    chosen_set, set_notes = choose_requirement_set(repo, pyproject, tox_ini, _read_text(repo / "noxfile.py"), python)
    requirements: list[str] = list(chosen_set.requirements) if chosen_set else []
    notes.extend(set_notes)

    src_roots, why = _src_roots(repo, pyproject, setup_cfg, setup_py)
    notes.append(f"src_roots: {why}")
    package_dirs, why = _package_dirs(repo, src_roots, name)
    notes.append(f"package_dirs: {why}")

    ini, ini_origin = _pytest_ini(repo, pyproject, setup_cfg, tox_ini)
    test_paths, why = _test_paths(repo, ini, ini_origin, package_dirs)
    from_tox = tox_test_paths(repo, tox_ini, python) if not _as_list(ini.get("testpaths")) else ()
    if len(from_tox) > 1 or (from_tox and from_tox != test_paths):
        # pyparsing 3.3.3: ``pytest tests examples/tiny/tests``; tests/ alone left 31 of plain pytest's passes
        test_paths, why = from_tox, f"the paths tox's pytest command gives ({', '.join(from_tox)}; no testpaths set)"
    notes.append(f"test_paths: {why}")
    doctest_paths = tuple(p for p in test_paths if _holds_project_code(p, src_roots, package_dirs))
    if doctest_paths:
        test_paths = tuple(p for p in test_paths if p not in doctest_paths)
        if not test_paths:
            test_paths, why = _test_paths(repo, {}, "", package_dirs)
            notes.append(f"test_paths: {why}")
        notes.append(f"doctest_paths: {list(doctest_paths)} (configured testpaths that hold the project's "
                     "own code: collected for doctests, not test code)")
    if not ini.get("testpaths"):
        doctests = _doctest_targets(repo, _as_list(ini.get("addopts")), package_dirs, test_paths,
                                    _as_list(ini.get("norecursedirs")) or list(NORECURSEDIRS))
        if doctests:
            doctest_paths = tuple(dict.fromkeys((*doctest_paths, *doctests)))
            notes.append(f"doctest_paths: {doctests} (addopts collect doctests and no testpaths is set, "
                         "so a plain `pytest` collects them from the root)")
    pytest_args, dropped = _pytest_args(ini.get("addopts", ""))
    if dropped:
        notes.append(f"pytest_args: kept {pytest_args[2:] or 'no'} options of addopts from {ini_origin}, "
                     f"dropped {dropped} (the runner measures coverage and schedules tests itself)")
    elif ini.get("addopts"):
        notes.append(f"pytest_args: addopts of {ini_origin} kept as configured")

    own = {Path(p).stem for p in package_dirs}
    imports, top, fixtures = _test_imports(repo, test_paths)
    runtime = {normalise_name(m) for m in _runtime_imports(pyproject, setup_cfg)} | {normalise_name(name)}
    on_top, by_import = _extras_the_tests_import(repo, package_dirs, own, imports, top, extras_available, chosen,
                                                 {*runtime, *map(_req_name, requirements),
                                                  *(_req_name(r) for e in chosen for r in extras_available[e])})
    if by_import and installable:
        # tabulate's `widechars = ["wcwidth"]`: 15 tests import wcwidth and skip without it (plain 303, ours 288);
        # cattrs' tests/test_preconf.py imports bson, and ujson... through cattrs.preconf.*, at its top: 5 extras,
        # one missing and none of the file collects (so those are not capped)
        chosen = [*chosen, *by_import]
        install_target = f".[{','.join(chosen)}]"
        notes.append(f"install_target: {install_target!r} (extras {by_import} hold modules the tests import"
                     + (f"; {on_top} at the top of a test file, directly or through the package's modules"
                        if on_top else "") + ")")
    by_code = _extras_for_optional_imports(repo, package_dirs, own, extras_available, chosen, requirements,
                                           runtime) if installable else []
    if by_code:
        # jsonschema 4.26.0's `format` extra: _format.py imports fqdn, idna... under suppress(ImportError), and
        # ~425 format tests skip without them (plain 7762, ours 7390). The extras go last in the target: the
        # install plan drops them from the end, one by one, when the install fails (sandboxes/install_plan.py)
        chosen = [*chosen, *(e for e, _ in by_code)]
        install_target = f".[{','.join(chosen)}]"
        notes.append(f"install_target: {install_target!r} (extras {[e for e, _ in by_code]} provide modules the "
                     "package's code imports but does not declare, guarded by ImportError, in a function or at "
                     "the top of a module: " + "; ".join(f"{e}: {', '.join(mods)}" for e, mods in by_code) + ")")
    declared = {_req_name(r) for r in requirements} | {_req_name(r) for e in chosen
                                                         for r in extras_available.get(e, ())}
    local = _local_modules(repo, test_paths)
    unguarded = {t.split(".")[0] for t in top}
    guessed: list[str] = []
    in_repo: set[str] | None = None
    for mod in sorted(imports):
        dist = KNOWN_TEST_IMPORTS.get(mod)
        if mod in own or mod in sys.stdlib_module_names or mod in local or normalise_name(mod) in declared:
            continue
        if dist is None:
            if mod not in ("pytest", "_pytest", "py") and mod not in _runtime_imports(pyproject, setup_cfg) and \
                    not any(dist_provides(d, mod) for d in declared):
                by = [e for e, reqs in extras_available.items() if any(dist_provides(_req_name(r), mod) for r in reqs)]
                in_repo = _repo_module_names(repo) if in_repo is None else in_repo
                if not by and mod in unguarded and mod not in _PYTHON2_MODULES and mod not in in_repo:
                    # dpath 2.2.0: 34 of its 79 tests import nose2 at their top and nothing declares it. Only
                    # an unguarded import is guessed: a guarded one is optional (cPickle, sklearn behind a try),
                    # and a module of that name anywhere in the repository is a helper put on sys.path
                    # (chardet 7.7.0's scripts/arabic_shape.py), not a distribution
                    guessed.append(mod)
                    notes.append(f"requirements: guessed {mod!r} (test files import it at their top, unguarded, "
                                 "and nothing maps it to a distribution); installed only if the install with it "
                                 "succeeds")
                    continue
                notes.append(f"requirements: test files import {mod!r}, " + (f"provided by extras {by}, not installed"
                             if by else "not mapped to a distribution") + "; if it is missing, the tests that "
                             "need it fail to collect")
            continue
        if normalise_name(dist) not in declared and normalise_name(dist) != normalise_name(name):
            requirements.append(dist)
            declared.add(normalise_name(dist))
            notes.append(f"requirements: added {dist!r} (imported by the tests, not declared)")
    for tp in test_paths:
        d = repo / tp
        if d.is_dir() and tp != "." and d.name in imports and not (d / "__init__.py").is_file():
            notes.append(f"test_paths: test files import from package {d.name!r} but {tp}/__init__.py is not in "
                         "the source (an incomplete sdist?): those files will not collect and are left out")
    for fixture in sorted(fixtures):
        dist = KNOWN_FIXTURES[fixture]
        if normalise_name(dist) not in declared and not declared & _FIXTURE_ALTERNATIVES.get(fixture, set()):
            requirements.append(dist)
            declared.add(normalise_name(dist))
            notes.append(f"requirements: added {dist!r} (tests use its fixture {fixture!r})")

    digest = _metadata_digest(repo, ("pyproject.toml", "setup.py", "setup.cfg", "tox.ini",
                                     *requirement_files(repo)))
    return EnvSpec(
        metadata_digest=digest,
        project_name=normalise_name(name), python=python, install_target=install_target,
        requirements=tuple(dict.fromkeys(requirements)), src_roots=src_roots, package_dirs=package_dirs,
        test_paths=test_paths, pytest_args=pytest_args, notes=tuple(notes), doctest_paths=doctest_paths,
        guessed_requirements=tuple(guessed),
    )


def _extras_the_tests_import(repo: Path, package_dirs: tuple[str, ...], own: set[str], imports: set[str],
                             top: set[str], extras: dict[str, list[str]], chosen: list[str],
                             declared: set[str]) -> tuple[list[str], list[str]]:
    """The extras whose requirements provide modules the test files import: (those imported at the top of a
    test file, all of them), then (those, plus up to 3 others). A module imported at the top of a test file,
    itself or through the package's own modules (``import_time_imports``), makes the whole file fail to
    collect without it; one imported under a guard or in a test only skips or fails those tests. Never
    docs/lint/... extras; at the top, not a dev or accelerator extra, nor one that adds nothing undeclared."""
    def dists(mods: Iterable[str]) -> set[str]:
        return {normalise_name(KNOWN_TEST_IMPORTS.get(m, m)) for m in mods
                if m not in own and m not in sys.stdlib_module_names}

    wanted = dists(imports)
    at_top = dists({d.split(".")[0] for d in top}) | dists(import_time_imports(
        repo, package_dirs, sorted(d for d in top if d.split(".")[0] in own)))
    candidates = {e: {_req_name(r) for r in reqs} for e, reqs in sorted(extras.items())
                  if e not in chosen and e not in _NO_TEST_EXTRAS and reqs}
    on_top = [e for e, names in candidates.items() if names & at_top - declared
              and e not in {*DEV_EXTRAS, *_ACCELERATOR_EXTRAS}]
    rest = [e for e, names in candidates.items() if e not in on_top and names & wanted][:3]
    return on_top, [*on_top, *rest]


def _extras_for_optional_imports(repo: Path, package_dirs: tuple[str, ...], own: set[str],
                                 extras: dict[str, list[str]], chosen: list[str], requirements: list[str],
                                 provided: set[str]) -> list[tuple[str, list[str]]]:
    """Up to 3 extras whose undeclared requirements provide modules the package's own code imports
    (``generators/optional_imports.py``: guarded, lazily or at the top of a module), with those modules
    and how they are imported. Not docs/lint/..., not a dev extra (a bundle of tooling), not an accelerator."""
    found = scan_package_imports(repo, package_dirs)
    declared = provided | {_req_name(r) for r in requirements} | {_req_name(r) for e in chosen for r in extras[e]}
    keys = {mod: {*dist_keys(mod), normalise_name(KNOWN_TEST_IMPORTS.get(mod, mod))} for mod in found.kinds
            if mod not in own and mod not in sys.stdlib_module_names}
    wanted = {key: mod for mod, ks in keys.items() if not ks & declared for key in ks}
    new_dists = {e: {_req_name(r) for r in reqs} - declared for e, reqs in extras.items()
                 if e not in chosen and e not in {*_NO_TEST_EXTRAS, *DEV_EXTRAS, *_ACCELERATOR_EXTRAS}}
    return [(e, [f"{m} ({found.kinds[m]})" for m in mods]) for e, mods in pick_extras(new_dists, wanted, cap=3)]


# --- project metadata ------------------------------------------------------------------------------

def _project_name(pyproject: dict[str, Any], cfg: configparser.ConfigParser, setup_py: str,
                  fallback: str) -> tuple[str, str]:
    if name := pyproject.get("project", {}).get("name"):
        return name, "pyproject.toml [project] name"
    if cfg.has_option("metadata", "name"):
        return cfg.get("metadata", "name"), "setup.cfg [metadata] name"
    if m := re.search(r"""\bname\s*=\s*['"]([A-Za-z0-9._-]+)['"]""", setup_py):
        return m.group(1), "setup.py name= argument"
    if name := setup_py_name_constant(setup_py):
        return name, "setup.py name= argument (a module-level constant)"
    fallback = re.sub(r"-\d[\w.]*-[0-9a-f]{12}$|-[0-9a-f]{12}$|-\d[\w.]*$", "", fallback)
    return fallback, f"directory name {fallback!r} (no metadata found)"


def _extras(pyproject: dict[str, Any], cfg: configparser.ConfigParser, setup_py: str,
            pkg_info: str = "") -> dict[str, list[str]]:
    extras: dict[str, list[str]] = {}
    for k, v in pyproject.get("project", {}).get("optional-dependencies", {}).items():
        extras[normalise_name(k)] = list(v)
    if cfg.has_section("options.extras_require"):
        for k, v in cfg.items("options.extras_require"):
            extras[normalise_name(k)] = [ln.strip() for ln in v.splitlines() if ln.strip()]
    for key, reqs in setup_py_extras(setup_py).items():  # literals read with ast: natsort's `icu` is PyICU
        extras.setdefault(normalise_name(key), reqs)
    for key, reqs in metadata_extras(pkg_info).items():  # what the build config did not say in literals
        extras.setdefault(key, reqs)
    return extras


def metadata_extras(pkg_info: str) -> dict[str, list[str]]:
    """The extras an sdist's ``PKG-INFO`` declares (``Provides-Extra``, and the ``Requires-Dist`` lines whose
    marker holds for that extra here): what setuptools computed from a ``setup.py`` that builds ``extras_require``
    in code (textdistance 4.6.3: ``extras = {...}`` then ``extras["all"] = ...``, which no literal reading can
    trust, so its ``test`` extra, numpy among it, was never installed and 43 of its 198 tests failed)."""
    if "Provides-Extra" not in pkg_info:
        return {}
    from email.parser import HeaderParser

    from packaging.markers import UndefinedComparison, UndefinedEnvironmentName
    from packaging.requirements import InvalidRequirement, Requirement

    meta = HeaderParser().parsestr(pkg_info)
    names = [normalise_name(n) for n in meta.get_all("Provides-Extra") or () if n.strip()]
    extras: dict[str, list[str]] = {n: [] for n in names}
    for line in meta.get_all("Requires-Dist") or ():
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        marker, req.marker = req.marker, None
        if marker is None:
            continue  # a runtime dependency, not an extra's
        for name in names:
            try:
                if marker.evaluate({"extra": name}) and not marker.evaluate({"extra": "__none__"}):
                    extras[name].append(str(req))  # name, extras, version or URL: the marker was evaluated
            except (UndefinedComparison, UndefinedEnvironmentName):  # the line is left out
                continue
    return extras


def _runtime_imports(pyproject: dict[str, Any], cfg: configparser.ConfigParser) -> set[str]:
    deps = list(pyproject.get("project", {}).get("dependencies", []))
    if cfg.has_option("options", "install_requires"):
        deps += cfg.get("options", "install_requires").splitlines()
    return {_req_name(d).replace("-", "_") for d in deps if d.strip()}


def _req_name(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    return normalise_name(m.group(1)) if m else ""


# --- layout ----------------------------------------------------------------------------------------

def _src_roots(repo: Path, pyproject: dict[str, Any] | None = None, cfg: configparser.ConfigParser | None = None,
               setup_py: str = "") -> tuple[tuple[str, ...], str]:
    declared, where = _declared_root(pyproject or {}, cfg, setup_py)
    if declared and declared != "." and (repo / declared).is_dir() and not declared.startswith(("/", "..")):
        return (declared,), f"{where} puts the packages under {declared}/"
    src = repo / "src"
    if src.is_dir() and any((p / "__init__.py").is_file() or (p.suffix == ".py")
                            for p in src.iterdir()):
        return ("src",), "src-layout (src/ holds the packages)"
    return (".",), "flat layout (packages at the repository root)"


def _declared_root(pyproject: dict[str, Any], cfg: configparser.ConfigParser | None,
                   setup_py: str) -> tuple[str, str]:
    """The root-package directory the build config declares (``package_dir = {"": "lib"}``), or ""."""
    tool = pyproject.get("tool", {}).get("setuptools", {})
    pkg_dir = tool.get("package-dir") if isinstance(tool, dict) else None
    if isinstance(pkg_dir, dict) and isinstance(pkg_dir.get(""), str):
        return pkg_dir[""].strip("/") or ".", "pyproject.toml [tool.setuptools] package-dir"
    find = tool.get("packages", {}) if isinstance(tool, dict) else {}
    where = find.get("find", {}).get("where") if isinstance(find, dict) and isinstance(find.get("find"), dict) else None
    if isinstance(where, list) and len(where) == 1 and isinstance(where[0], str):
        return where[0].strip("/") or ".", "pyproject.toml [tool.setuptools.packages.find] where"
    if cfg is not None and cfg.has_option("options", "package_dir"):
        for line in cfg.get("options", "package_dir").splitlines():
            key, eq, value = line.partition("=")
            if eq and not key.strip() and value.strip():
                return value.strip().strip("/"), "setup.cfg [options] package_dir"
    if "package_dir" in setup_py:  # a literal ``setup(package_dir={"": "lib"})``; setup.py is never run
        try:
            tree = pyparse.parse(setup_py)
        except (SyntaxError, ValueError):
            return "", ""
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "package_dir" and isinstance(node.value, ast.Dict):
                for k, v in zip(node.value.keys, node.value.values, strict=True):
                    if isinstance(k, ast.Constant) and k.value == "" and isinstance(v, ast.Constant) \
                            and isinstance(v.value, str):
                        return v.value.strip("/") or ".", "setup.py package_dir"
    return "", ""


def _package_dirs(repo: Path, roots: tuple[str, ...], name: str) -> tuple[tuple[str, ...], str]:
    root = repo / roots[0]
    for egg in sorted(repo.glob("*.egg-info")) + sorted(root.glob("*.egg-info")):
        top = egg / "top_level.txt"
        if top.is_file():
            names = [n.strip() for n in top.read_text().splitlines() if n.strip()]
            found = [_rel(repo, p) for n in names for p in (root / n, root / f"{n}.py") if p.exists()]
            if found:
                return tuple(found), f"{_rel(repo, top)} lists {names}"
    found = []
    for p in sorted(root.iterdir()):
        if p.name.startswith((".", "_")) or p.name in _SKIP_DIRS or p.name.endswith(".egg-info"):
            continue
        if p.is_dir() and (p / "__init__.py").is_file():
            found.append(_rel(repo, p))
        elif p.suffix == ".py" and p.stem not in _SKIP_MODULES and not _is_test_name(p.name):
            found.append(_rel(repo, p))
    if found:
        return tuple(found), f"importable non-test packages/modules under {roots[0]!r}"
    return (), f"none found under {roots[0]!r} (expected a package dir or module named like {name!r})"


def _rel(repo: Path, p: Path) -> str:
    return p.relative_to(repo).as_posix()


_TEST_DEF = re.compile(r"^(?:\s*(?:async\s+)?def test\w*\s*\(|class Test\w*\b|class \w+\(.*TestCase\))", re.MULTILINE)


def _defines_tests(path: Path) -> bool:
    try:
        return path.name != "conftest.py" and bool(_TEST_DEF.search(path.read_text(errors="replace")))
    except OSError:
        return False


def _is_test_name(filename: str) -> bool:
    return filename.startswith("test_") or filename.endswith("_test.py") or filename in ("tests.py", "test.py")


# --- pytest configuration --------------------------------------------------------------------------

def _pytest_ini(repo: Path, pyproject: dict[str, Any], cfg: configparser.ConfigParser,
                tox: configparser.ConfigParser) -> tuple[dict[str, Any], str]:
    """pytest's own precedence: pytest.ini, pyproject.toml, tox.ini, setup.cfg."""
    for fname in ("pytest.ini", ".pytest.ini"):
        ini = _read_ini(repo / fname)
        if ini.has_section("pytest"):
            return dict(ini.items("pytest")), fname
    tool = pyproject.get("tool", {}).get("pytest", {})
    if "ini_options" in tool:
        return dict(tool["ini_options"]), "pyproject.toml [tool.pytest.ini_options]"
    if tool:
        return {k: v for k, v in tool.items() if not isinstance(v, dict)}, "pyproject.toml [tool.pytest]"
    if tox.has_section("pytest"):
        return dict(tox.items("pytest")), "tox.ini [pytest]"
    if cfg.has_section("tool:pytest"):
        return dict(cfg.items("tool:pytest")), "setup.cfg [tool:pytest]"
    return {}, "no pytest configuration"


def collected_names(repo: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """pytest's ``python_classes`` and ``python_functions`` of the repository (defaults ``Test``, ``test``): mako
    1.4.3 sets ``python_classes = ["*Test", "Test*"]``, and its ``FilterTest::test_*`` tests could not be hidden."""
    ini, _ = _pytest_ini(repo, _read_toml(repo / "pyproject.toml"), _read_ini(repo / "setup.cfg"),
                         _read_ini(repo / "tox.ini"))
    return tuple(_as_list(ini.get("python_classes"))) or ("Test",), \
        tuple(_as_list(ini.get("python_functions"))) or ("test",)


def name_collected(name: str, patterns: Iterable[str]) -> bool:
    """pytest's rule for ``python_classes``/``python_functions``: a prefix, or a glob where it has one."""
    return any(name.startswith(p) or (any(c in p for c in "*?[") and fnmatch.fnmatch(name, p)) for p in patterns)


def _holds_project_code(path: str, src_roots: tuple[str, ...], package_dirs: tuple[str, ...]) -> bool:
    p = path.strip("/")
    if p in (".", ""):
        return False
    if p in src_roots:
        return True
    return any(d == p or d.startswith(p + "/") or p.startswith(d + "/") for d in package_dirs)


NORECURSEDIRS = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}")  # pytest's default
DOCTEST_GLOB_LIMIT = 200


def _doctest_targets(repo: Path, addopts: list[str], package_dirs: tuple[str, ...], test_paths: tuple[str, ...] = (),
                     norecurse: Iterable[str] = NORECURSEDIRS) -> list[str]:
    """What a plain ``pytest`` at the root collects as doctests besides the tests: the package directories
    (``--doctest-modules``), and every file a ``--doctest-glob`` pattern matches in the folders pytest walks
    from the root (not the test paths, which the run collects anyway). Only the root's files were taken: uritools
    7.0.1 (``--doctest-glob=*.rst``) lost ``docs/index.rst``, which plain pytest collects."""
    targets: list[str] = []
    if "--doctest-modules" in addopts:
        targets += list(package_dirs)
    patterns = [opt.split("=", 1)[1] if opt.startswith("--doctest-glob=") else addopts[i + 1]
                for i, opt in enumerate(addopts)
                if opt.startswith("--doctest-glob=") or (opt == "--doctest-glob" and i + 1 < len(addopts))]
    if patterns:
        walked = {*test_paths, *targets}  # folders the run is given anyway: their files come with them
        targets += _files_pytest_walks(repo, patterns, walked, tuple(norecurse))[:DOCTEST_GLOB_LIMIT]
    return targets


def _files_pytest_walks(repo: Path, patterns: list[str], skip: set[str], norecurse: tuple[str, ...]) -> list[str]:
    """Repository-relative files whose name matches one of ``patterns``, in the folders pytest recurses into from
    the root (``norecursedirs``, virtualenvs left out) outside ``skip``, sorted."""
    found: list[str] = []
    for here, dirs, files in os.walk(repo):
        rel_here = Path(here).relative_to(repo)
        dirs[:] = sorted(d for d in dirs if not any(fnmatch.fnmatch(d, n) for n in norecurse)
                         and (rel_here / d).as_posix() not in skip and not (Path(here, d, "pyvenv.cfg")).exists())
        found += [(rel_here / f).as_posix() for f in sorted(files)
                  if any(fnmatch.fnmatch(f, p) for p in patterns) and (rel_here / f).as_posix() not in skip]
    return sorted(found)


def _as_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return shlex.split(str(value or ""))


def _test_paths(repo: Path, ini: dict[str, Any], origin: str,
                package_dirs: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    configured = [p for p in _as_list(ini.get("testpaths")) if (repo / p).exists()]
    if configured:
        return tuple(configured), f"testpaths of {origin}"
    patterns = _as_list(ini.get("python_files")) or ["test_*.py", "*_test.py"]  # what pytest collects from a dir

    def collected(name: str) -> bool:
        return any(fnmatch.fnmatch(name, pat) for pat in patterns)

    for name in ("tests", "test", "testing"):
        if (repo / name).is_dir() and any(collected(p.name) for p in (repo / name).rglob("*.py")):
            return (name,), f"{name}/ holds test files"
    # pyotp 2.12.1's whole suite is a root test.py, which no default python_files pattern matches: pytest
    # collects nothing from the root, but collects a file it is given by name, so it is given
    root_tests = sorted(p.name for p in repo.glob("*.py") if collected(p.name) or p.name == "tests.py" or
                        (p.stem == "test" and _defines_tests(p)))
    if root_tests:
        return tuple(root_tests), "test modules at the repository root"
    for name in ("tests", "test", "testing"):
        # decorator's suite is tests/test.py: pytest collects nothing from the folder by name, but collects a
        # file it is given, so the test-named files that define tests are given one by one (not
        # tests/documentation.py, whose test_* functions the suite runs through doctest)
        files = sorted(_rel(repo, p) for p in (repo / name).rglob("*.py")
                       if (repo / name).is_dir() and p.stem.lower().startswith("test") and _defines_tests(p))
        if files:
            return tuple(files[:200]), (f"{name}/ defines tests in files pytest's python_files ({', '.join(patterns)}) "
                                        f"does not match, given by name: {files[:3]}")
    inside = sorted({_rel(repo, p.parent) for d in package_dirs for p in (repo / d).rglob("test*/__init__.py")})
    if inside:
        return tuple(inside), "test packages inside the project's packages"
    return (".",), "no test folder found; pytest collects from the repository root"


def _pytest_args(addopts: Any) -> tuple[tuple[str, ...], list[str]]:
    """Keep the addopts our runner can honour; returns (args, dropped).

    When addopts exist, the args start with ``-o addopts=`` so pytest does not re-apply the
    configured value (which may name plugins that are not installed, such as ``--cov``).
    """
    opts = _as_list(addopts)
    if not opts:
        return (), []
    kept: list[str] = []
    dropped: list[str] = []
    i = 0
    while i < len(opts):
        opt = opts[i]
        flag = opt.split("=", 1)[0]
        # ``-p no:NAME`` turns a plugin off (colorlog 6.12.0: ``-p no:logging``, without which 3 of its tests
        # fail): kept, as the grading keeps it (``pinned_options``); ``-p MODULE`` loads one and goes
        if opt.startswith("-pno:") or (opt == "-p" and i + 1 < len(opts) and opts[i + 1].startswith("no:")):
            kept += [opt] if opt != "-p" else [opt, opts[i + 1]]
            i += 1 if opt != "-p" else 2
            continue
        if any(flag == d or (flag.startswith(d) and d.startswith("--")) for d in _DROP_OPTS) or \
                (flag.startswith("-n") and len(flag) > 2 and flag[2:].isalnum() and not flag.startswith("--")) or \
                (flag.startswith("-p") and not flag.startswith("--") and len(flag) > 2):
            dropped.append(opt)
            if "=" not in opt and flag in _OPTS_WITH_VALUE and i + 1 < len(opts) and \
                    not opts[i + 1].startswith("-"):
                dropped.append(opts[i + 1])
                i += 1
        else:
            kept.append(opt)
        i += 1
    if not dropped:
        return (), []  # pytest applies the configured addopts itself
    return ("-o", "addopts=", *kept), dropped


# --- test imports ----------------------------------------------------------------------------------

def _test_files(repo: Path, test_paths: Iterable[str]) -> list[Path]:
    files: list[Path] = []
    for tp in test_paths:
        p = repo / tp
        if p.is_file() and p.suffix == ".py":
            files.append(p)
        elif p.is_dir() and tp != ".":
            files += [f for f in sorted(p.rglob("*.py")) if "site-packages" not in f.parts]
    files += [f for f in sorted(repo.glob("conftest.py"))]
    if not files:
        files = [f for f in sorted(repo.rglob("*.py")) if _is_test_name(f.name) or f.name == "conftest.py"]
    return files[:2000]


def _test_imports(repo: Path, test_paths: Iterable[str]) -> tuple[set[str], set[str], set[str]]:
    """Top-level modules imported by test files, the dotted modules a test file imports unconditionally at
    its top level (not in a ``try``, an ``if``, a function; ``pytest.importorskip`` is a call), and known
    plugin fixtures they request."""
    mods: set[str] = set()
    top: set[str] = set()
    fixtures: set[str] = set()
    for f in _test_files(repo, test_paths):
        try:
            tree = pyparse.parse(f.read_text(errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for stmt in tree.body:
            if isinstance(stmt, ast.Import):
                top.update(a.name for a in stmt.names)
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                top.update((stmt.module, *(f"{stmt.module}.{a.name}" for a in stmt.names)))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                mods.add(node.module.split(".")[0])
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "importorskip":
                continue  # optional by design
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
                fixtures.update(a.arg for a in node.args.args if a.arg in KNOWN_FIXTURES)
    return mods, top, fixtures


def _repo_module_names(repo: Path, limit: int = 50_000) -> set[str]:
    """The names of every Python module and folder in the repository (up to ``limit`` entries)."""
    names: set[str] = set()
    for i, p in enumerate(repo.rglob("*")):
        if i >= limit:
            break
        if p.suffix == ".py" or p.is_dir():
            names.add(p.stem if p.suffix == ".py" else p.name)
    return names


def _local_modules(repo: Path, test_paths: Iterable[str]) -> set[str]:
    """Modules the tests can import from their own folders (helpers, conftest, test packages)."""
    local: set[str] = {"conftest"}
    for tp in (*test_paths, "."):
        d = repo / tp
        if d.is_dir():
            local.update(p.stem for p in d.glob("*.py"))
            local.update(p.name for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))
    return local


def _metadata_digest(repo: Path, files: Iterable[str]) -> str:
    h = hashlib.sha256()
    for rel in sorted(set(files)):
        p = repo / rel
        if p.is_file():
            h.update(rel.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


# --- file readers ----------------------------------------------------------------------------------

def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text()) if path.is_file() else {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


def _read_ini(path: Path) -> configparser.ConfigParser:
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    if path.is_file():
        try:
            cfg.read_string(path.read_text(errors="replace"))
        except configparser.Error:
            pass
    return cfg


def _read_text(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""
