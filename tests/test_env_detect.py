"""Environment detection on small repositories written by each test."""

from __future__ import annotations

from pathlib import Path

import pytest

from generators.env_detect import detect_env
from taskforge.core.environment import EnvSpec
from tests.fixtures_repos import write


def test_pyproject_extras_pytest_config_and_cov_opts_dropped(tmp_path: Path) -> None:
    write(tmp_path, {
        "pyproject.toml": """
            [build-system]
            requires = ["setuptools"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "My_Lib"
            [project.optional-dependencies]
            tests = ["pytest", "freezegun"]
            docs = ["sphinx"]
            [tool.pytest.ini_options]
            testpaths = ["tests"]
            addopts = "-ra --cov=my_lib --cov-report term-missing -n auto --strict-markers"
            """,
        "my_lib/__init__.py": "",
        "tests/test_a.py": "import freezegun\nimport pytest\n\ndef test_a():\n    pass\n",
    })
    spec = detect_env(tmp_path)
    assert spec.project_name == "my-lib"
    assert spec.install_target == ".[tests]"
    assert spec.test_paths == ("tests",)
    assert spec.package_dirs == ("my_lib",)
    assert spec.src_roots == (".",)
    assert spec.pytest_args == ("-o", "addopts=", "-ra", "--strict-markers")
    assert "freezegun" not in spec.requirements  # declared in the extra already
    assert any("dropped" in n and "--cov=my_lib" in n and "term-missing" in n for n in spec.notes)


def test_setup_cfg_extras_and_tool_pytest_section(tmp_path: Path) -> None:
    write(tmp_path, {
        "setup.cfg": """
            [metadata]
            name = cfgproj
            [options.extras_require]
            testing = pytest-mock
            [tool:pytest]
            testpaths = testing
            """,
        "setup.py": "from setuptools import setup\nsetup()\n",
        "cfgproj.py": "X = 1\n",
        "testing/test_x.py": "def test_x(mocker):\n    pass\n",
    })
    spec = detect_env(tmp_path)
    assert spec.project_name == "cfgproj"
    assert spec.install_target == ".[testing]"
    assert spec.test_paths == ("testing",)
    assert spec.package_dirs == ("cfgproj.py",)
    assert "pytest-mock" not in spec.requirements  # the extra declares it


def test_src_layout_and_undeclared_test_dependencies_detected(tmp_path: Path) -> None:
    write(tmp_path, {
        "pyproject.toml": '[project]\nname = "srcproj"\n',
        "src/srcproj/__init__.py": "",
        "src/srcproj/core.py": "",
        "tests/helpers.py": "",
        "tests/test_core.py": (
            "import hypothesis\nfrom pytest_mock import MockerFixture\nimport yaml.loader\n"
            "import helpers\nimport srcproj\nimport json\nimport mysterylib\n\n"
            "def test_bench(benchmark):\n    pass\n"
        ),
    })
    spec = detect_env(tmp_path)
    assert spec.src_roots == ("src",)
    assert spec.package_dirs == ("src/srcproj",)
    assert spec.install_target == "."
    assert set(spec.requirements) == {"hypothesis", "pytest-mock", "PyYAML", "pytest-benchmark"}
    notes = " ".join(spec.notes)
    assert "guessed 'mysterylib'" in notes and spec.guessed_requirements == ("mysterylib",)
    assert "added 'hypothesis'" in notes


def test_dependency_group_is_the_one_set_and_requirement_files_are_not_added(tmp_path: Path) -> None:
    write(tmp_path, {
        "pyproject.toml": """
            [project]
            name = "grp"
            [dependency-groups]
            base = ["pympler"]
            tests = [{include-group = "base"}, "pytest>=8"]
            """,
        "requirements/tests.txt": "six\n",
        "grp/__init__.py": "",
        "tests/test_g.py": "def test_g():\n    pass\n",
    })
    spec = detect_env(tmp_path)
    assert spec.requirements == ("pympler", "pytest>=8")
    notes = "\n".join(spec.notes)
    assert "dependency-group 'tests'" in notes and "not combined with requirements/tests.txt" in notes


def test_requirement_file_includes_followed_options_dropped(tmp_path: Path) -> None:
    write(tmp_path, {
        "pyproject.toml": "[project]\nname = 'grp'\n",
        "requirements/tests.txt": "-r common.txt\n# comment\nattrs==23.1 ; python_version >= '3.8'\n-e .\n",
        "requirements/common.txt": "six\n",
        "grp/__init__.py": "",
        "tests/test_g.py": "def test_g():\n    pass\n",
    })
    spec = detect_env(tmp_path)
    assert "six" in spec.requirements
    assert any(r.startswith("attrs==23.1") for r in spec.requirements)
    assert not any(r.startswith("-e") for r in spec.requirements)


def test_lock_for_another_python_is_never_unioned(tmp_path: Path) -> None:
    """jinja2 3.1.6: requirements/tests.txt (3.13 lock) and tests37.txt (3.7 lock) both match tests*.txt."""
    write(tmp_path, {
        "pyproject.toml": "[project]\nname = 'jin'\n",
        "requirements/tests.txt": "attrs==24.3.0\npytest==8.3.4\n",
        "requirements/tests37.txt": "attrs==24.2.0\npytest==7.4.4\n",
        "jin/__init__.py": "",
        "tests/test_j.py": "def test_j():\n    pass\n",
    })
    assert detect_env(tmp_path, python="3.11").requirements == ("attrs==24.3.0", "pytest==8.3.4")
    assert detect_env(tmp_path, python="3.7").requirements == ("attrs==24.2.0", "pytest==7.4.4")


def test_tox_env_of_the_running_python_wins(tmp_path: Path) -> None:
    write(tmp_path, {
        "pyproject.toml": "[project]\nname = 'toxy'\n",
        "tox.ini": """
            [testenv]
            deps =
                -r requirements/tests.txt
                py37: importlib-metadata
                py311: tomli-w
            [testenv:py37,py3.7]
            deps = -r requirements/tests37.txt
            """,
        "requirements/tests.txt": "pytest==8.3.4\n",
        "requirements/tests37.txt": "pytest==7.4.4\n",
        "toxy/__init__.py": "",
        "tests/test_t.py": "def test_t():\n    pass\n",
    })
    assert detect_env(tmp_path, python="3.11").requirements == ("pytest==8.3.4", "tomli-w")
    assert detect_env(tmp_path, python="3.7").requirements == ("pytest==7.4.4",)


def test_tox_factor_conditions_of_the_test_env(tmp_path: Path) -> None:
    """pyparsing 3.3.3: deps are conditional on the ``unit`` factor of ``py311-unit``, some negated."""
    write(tmp_path, {
        "pyproject.toml": "[project]\nname = 'facty'\n",
        "tox.ini": """
            [tox]
            envlist =
                py39-unit,py{310,311,314t}-{unit,doctest},mypy-check
            [testenv]
            deps =
                unit: pytest
                unit-!py315t: matplotlib; python_version <= '3.15'
                py311-!unit: never-this
                doctest: sphinx
            """,
        "tests/requirements.txt": "coverage\ntox\npre-commit\n",
        "facty/__init__.py": "",
        "tests/test_t.py": "def test_t():\n    pass\n",
    })
    assert detect_env(tmp_path, python="3.11").requirements == ("pytest", "matplotlib; python_version <= '3.15'")


def test_tox_pytest_command_paths_are_the_test_paths(tmp_path: Path) -> None:
    """pyparsing 3.3.3: ``unit: pytest tests examples/tiny/tests {posargs}`` and no testpaths; tests/ alone
    left out the 31 passing tests of examples/tiny/tests that plain pytest (and the project's CI) runs."""
    write(tmp_path, {
        "pyproject.toml": "[project]\nname = 'facty'\n",
        "tox.ini": """
            [tox]
            envlist = py{310,311}-{unit,doctest}
            [testenv]
            deps = unit: pytest
            commands =
                unit: pytest tests examples/tiny/tests -p no:warnings {posargs}
                doctest: sphinx-build -b doctest docs docs/_build
                pytest README.rst
                py310: pytest never_this
            """,
        "facty/__init__.py": "",
        "tests/test_t.py": "def test_t():\n    pass\n",
        "examples/tiny/tests/test_tiny.py": "def test_tiny():\n    pass\n", "README.rst": ">>> 1\n1\n",
    })
    spec = detect_env(tmp_path, python="3.11")
    assert spec.test_paths == ("tests", "examples/tiny/tests")  # not README.rst (natsort: a doctest command)
    assert any("tox's pytest command" in n for n in spec.notes)
    write(tmp_path, {"pyproject.toml": "[project]\nname = 'facty'\n[tool.pytest.ini_options]\ntestpaths = ['tests']\n"})
    assert detect_env(tmp_path, python="3.11").test_paths == ("tests",)  # configured testpaths win


@pytest.mark.parametrize("config", [
    {"setup.py": "from setuptools import setup\nsetup(name='yamlish', package_dir={'': 'lib'}, packages=['yamlish'])\n"},
    {"setup.cfg": "[metadata]\nname = yamlish\n[options]\npackage_dir =\n    =lib\n"},
    {"pyproject.toml": "[project]\nname = 'yamlish'\n[tool.setuptools]\npackage-dir = {'' = 'lib'}\n"},
    {"pyproject.toml": "[project]\nname = 'yamlish'\n[tool.setuptools.packages.find]\nwhere = ['lib']\n"},
])
def test_a_declared_package_root_is_the_source_root(tmp_path: Path, config: dict[str, str]) -> None:
    """pyyaml 6.0.4: ``package_dir={'': 'lib'}``, and a root ``yaml/`` of Cython sources that, taken for the
    package, made every test file fail to import."""
    write(tmp_path, {**config, "lib/yamlish/__init__.py": "X = 1\n", "yamlish/_ext.pyx": "# cython\n",
                     "tests/test_t.py": "def test_t():\n    pass\n"})
    spec = detect_env(tmp_path, python="3.11")
    assert spec.src_roots == ("lib",) and spec.package_dirs == ("lib/yamlish",)


def test_tox_factor_helpers() -> None:
    import configparser

    from generators.requirement_sets import expand_envlist, factor_condition_holds, tox_factors

    assert expand_envlist("py{310,311}-{unit,doctest}, lint") == [
        "py310-unit", "py310-doctest", "py311-unit", "py311-doctest", "lint"]
    tox = configparser.ConfigParser()
    tox.read_string("[tox]\nenvlist = lint, py311-docs, py{311,312}-{cov,nocov}\n")
    assert tox_factors(tox, "3.11") >= {"py311", "cov"} and "docs" not in tox_factors(tox, "3.11")
    assert factor_condition_holds("py37,py311", {"py311"}) and not factor_condition_holds("py37", {"py311"})
    assert factor_condition_holds("unit-!pypy", {"unit", "py311"})
    assert not factor_condition_holds("unit-!py311", {"unit", "py311"})
    # python-dotenv 1.2.4's tox.ini: "py{310,311,312,313,314,314t,pypy3}: ipython" (its 3 IPython tests skipped)
    assert factor_condition_holds("py{310,311,312,313,314,314t,pypy3}", {"py311"})
    assert not factor_condition_holds("py{312,313}", {"py311"})
    tox.read_string("[testenv]\ndeps =\n    pytest\n    py{310,311,pypy3}: ipython\n    py{312,313}: other\n")
    from generators.requirement_sets import _tox_deps

    found = _tox_deps(Path("."), tox, "3.11")
    assert found is not None and found.requirements == ("pytest", "ipython")


def test_python_tag_of_requirement_file_names() -> None:
    from generators.requirement_sets import python_tag

    assert python_tag("requirements/tests37.txt") == "3.7"
    assert python_tag("requirements/tests-py3.11.txt") == "3.11"
    assert python_tag("requirements/test_py310.in") == "3.10"
    assert python_tag("requirements/tests.txt") == ""
    assert python_tag("requirements-test.txt") == ""


def test_root_test_module_and_plain_directory(tmp_path: Path) -> None:
    write(tmp_path, {"thing.py": "def f():\n    return 1\n", "test_thing.py": "def test_f():\n    pass\n",
                     "docs/conf.py": ""})
    spec = detect_env(tmp_path, name_hint="thing-0123456789ab")
    assert spec.install_target == ""
    assert spec.test_paths == ("test_thing.py",)
    assert spec.package_dirs == ("thing.py",)
    assert spec.project_name == "thing"


def test_a_root_test_py_that_defines_tests_is_given_by_name(tmp_path: Path) -> None:
    """pyotp 2.12.1: the whole suite is a root ``test.py``, which no default ``python_files`` matches, so
    collecting from the root found nothing ("no tests pytest can collect"); pytest collects a file given by name."""
    write(tmp_path, {"pyproject.toml": '[build-system]\nrequires = ["setuptools"]\n[project]\nname = "otp"\n',
                     "src/otp/__init__.py": "X = 1\n",
                     "test.py": "import unittest\nclass T(unittest.TestCase):\n    def test_x(self):\n        pass\n"})
    assert detect_env(tmp_path).test_paths == ("test.py",)
    write(tmp_path, {"test.py": "print('a script, not tests')\n"})
    assert detect_env(tmp_path).test_paths == (".",)


def test_unmapped_unguarded_test_imports_are_guessed_and_nothing_else(tmp_path: Path) -> None:
    """An unmapped module a test file imports at its top, unguarded, is guessed as the distribution of that name
    (dpath 2.2.0's nose2 before it was mapped); not one behind a try (a Python 2 fallback, an optional
    scikit-learn), not a Python 2 module, not a helper that lives anywhere in the repository (chardet 7.7.0's
    scripts/arabic_shape.py, imported after a sys.path insert)."""
    write(tmp_path, {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\n[project]\nname = "pk"\n',
        "pk/__init__.py": "",
        "scripts/helper_mod.py": "",
        "tests/test_a.py": "from fancylib.tools import helper\nimport helper_mod\nimport cPickle\n"
                           "try:\n    import optlib\nexcept ImportError:\n    optlib = None\n"
                           "import sklearn\n\ndef test_a():\n    pass\n"})
    spec = detect_env(tmp_path)
    assert spec.guessed_requirements == ("fancylib",)
    assert "scikit-learn" in spec.requirements and "sklearn" not in spec.guessed_requirements
    assert any("guessed 'fancylib'" in n for n in spec.notes)


def _with_addopts(tmp_path: Path, name: str, addopts: str, files: dict[str, str]) -> EnvSpec:
    """``detect_env`` of a project ``name`` whose pyproject.toml sets ``addopts``, with ``files``."""
    write(tmp_path, {"pyproject.toml": f'[project]\nname = "{name}"\n[tool.pytest.ini_options]\n'
                                       f'addopts = "{addopts}"\n', **files})
    return detect_env(tmp_path)


def test_doctest_paths_are_not_test_paths(tmp_path: Path) -> None:
    spec = _with_addopts(tmp_path, "dt", "--doctest-modules --doctest-glob=README.rst --cov=dt",
                         {"dt/__init__.py": "", "README.rst": "", "tests/test_d.py": "def test_d():\n    pass\n"})
    assert spec.test_paths == ("tests",)
    assert spec.doctest_paths == ("dt", "README.rst")
    assert spec.pytest_args == ("-o", "addopts=", "--doctest-modules", "--doctest-glob=README.rst")


def test_a_doctest_glob_matches_in_every_folder_pytest_walks_from_the_root(tmp_path: Path) -> None:
    """uritools 7.0.1: ``--doctest-glob=*.rst`` and no testpaths, so plain pytest collects README.rst and
    docs/index.rst; only the root's files were taken (53 of plain's 54). Folders pytest does not recurse into
    (dot folders, build, a virtualenv) and those the run is given anyway (the test paths) are left out."""
    spec = _with_addopts(tmp_path, "ut", "--doctest-glob=*.rst",
                         {"src/ut/__init__.py": "", "README.rst": "", "docs/index.rst": "", "docs/conf.py": "",
                          "docs/api/deep.rst": "", "tests/test_u.py": "def test_u():\n    pass\n",
                          "tests/data.rst": "", ".github/x.rst": "", "build/y.rst": "", "env/pyvenv.cfg": "",
                          "env/z.rst": ""})
    assert spec.test_paths == ("tests",)
    assert spec.doctest_paths == ("README.rst", "docs/api/deep.rst", "docs/index.rst")


def test_a_plugin_turned_off_stays_off_and_a_plugin_loaded_is_dropped(tmp_path: Path) -> None:
    """colorlog 6.12.0's ``-p no:logging``: dropped with every ``-p``, 3 of its tests failed (30 of plain's
    33) while the grading, which keeps it, passed them."""
    spec = _with_addopts(tmp_path, "cl", "-p no:logging -pno:cacheprovider -p pytest_cov --cov=cl",
                         {"cl/__init__.py": "", "tests/test_c.py": "def test_c():\n    pass\n"})
    assert spec.pytest_args == ("-o", "addopts=", "-p", "no:logging", "-pno:cacheprovider")


def test_configured_testpaths_holding_source_become_doctest_paths(tmp_path: Path) -> None:
    write(tmp_path, {
        "pyproject.toml": '[project]\nname = "hz"\n[tool.pytest]\ntestpaths = ["src", "tests"]\n'
                          'addopts = ["--doctest-modules"]\n',
        "src/hz/__init__.py": "", "tests/test_h.py": "def test_h():\n    pass\n",
    })
    spec = detect_env(tmp_path)
    assert spec.test_paths == ("tests",)
    assert spec.doctest_paths == ("src",)
    assert spec.pytest_args == ()  # nothing to drop: pytest applies the configured addopts itself


def test_spec_key_changes_with_content_not_notes(tmp_path: Path) -> None:
    write(tmp_path, {"p/__init__.py": "", "tests/test_p.py": "def test_p():\n    pass\n"})
    a = detect_env(tmp_path)
    b = detect_env(tmp_path)
    assert a.key == b.key
    write(tmp_path, {"tests/test_q.py": "import hypothesis\n"})
    assert detect_env(tmp_path).key != a.key


def test_incomplete_sdist_missing_tests_package_is_reported(tmp_path: Path) -> None:
    write(tmp_path, {"lib/__init__.py": "", "tests/test_l.py": "from tests import helper\n\ndef test_l():\n    pass\n"})
    spec = detect_env(tmp_path)
    assert any("tests/__init__.py is not in the source" in n for n in spec.notes)
    assert spec.requirements == ()


def test_test_files_pytest_would_not_collect_from_their_folder_are_given_by_name(tmp_path: Path) -> None:
    """decorator 5.3.1: its suite is tests/test.py; `pytest` (and `pytest tests`) collect nothing from it."""
    write(tmp_path, {"src/deco/__init__.py": "def f():\n    return 1\n",
                     "tests/__init__.py": "", "tests/test.py": "import unittest\n\nclass DocumentationTestCase(unittest.TestCase):\n"
                     "    def test_f(self):\n        pass\n",
                     "tests/documentation.py": "'''prose only'''\n", "tests/conftest.py": ""})
    spec = detect_env(tmp_path, name_hint="deco-0123456789ab")
    assert spec.test_paths == ("tests/test.py",)
    assert any("given by name" in n for n in spec.notes)


def test_a_configured_python_files_pattern_keeps_the_folder(tmp_path: Path) -> None:
    write(tmp_path, {"lk/__init__.py": "", "tests/__main__.py": "def test_a():\n    pass\n",
                     "pytest.ini": "[pytest]\npython_files = __main__.py\n"})
    assert detect_env(tmp_path, name_hint="lk-0123456789ab").test_paths == ("tests",)


def test_an_extra_whose_module_the_tests_import_is_installed(tmp_path: Path) -> None:
    """tabulate 0.10.0: `widechars = ["wcwidth"]`; 15 tests import wcwidth and skip without it."""
    write(tmp_path, {"pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
                                       '[project]\nname = "tab"\nversion = "1"\n[project.optional-dependencies]\n'
                                       'widechars = ["wcwidth"]\ndocs = ["sphinx"]\nfast = ["orjson>=3"]\n',
                     "tab/__init__.py": "", "test/test_wide.py": "def test_w():\n    try:\n        import wcwidth\n"
                     "    except ImportError:\n        return\n", "test/test_doc.py": "import sphinx\n"})
    spec = detect_env(tmp_path, name_hint="tab-0123456789ab")
    assert spec.install_target == ".[widechars]"  # docs is never a test extra; fast is not imported


def test_project_name_from_a_setup_py_constant(tmp_path: Path) -> None:
    """pyyaml 6.0.4: ``NAME = 'PyYAML'`` ... ``setup(name=NAME)``; the directory name once gave 'pyyaml-6-0-4'."""
    repo = tmp_path / "pyyaml-6.0.4"
    write(repo, {"setup.py": "NAME = 'PyYAML'\nfrom setuptools import setup\nsetup(name=NAME, version='6.0.4')\n",
                 "lib/yaml/__init__.py": "", "tests/test_a.py": "def test_a():\n    pass\n"})
    spec = detect_env(repo)
    assert spec.project_name == "pyyaml" or spec.project_name == "PyYAML"
    assert any("module-level constant" in n for n in spec.notes)
    bare = tmp_path / "thing-2.1.0"
    write(bare, {"thing/__init__.py": "", "tests/test_a.py": "def test_a():\n    pass\n"})
    assert detect_env(bare).project_name == "thing"


def test_a_declared_alternative_provider_of_a_fixture_is_enough(tmp_path: Path) -> None:
    """wcwidth declares pytest-codspeed, whose ``benchmark`` fixture its tests use: no pytest-benchmark too."""
    tests = {"tests/test_a.py": "def test_a(benchmark):\n    benchmark(int)\n", "pkg/__init__.py": ""}
    write(tmp_path / "codspeed", {**tests, "requirements-tests.txt": "pytest-codspeed==5.0.3\n"})
    spec = detect_env(tmp_path / "codspeed")
    assert not any(r.startswith("pytest-benchmark") for r in spec.requirements), spec.requirements
    write(tmp_path / "bare", tests)
    assert "pytest-benchmark" in detect_env(tmp_path / "bare").requirements


_OPTIONAL_PYPROJECT = """
    [build-system]
    requires = ["setuptools"]
    build-backend = "setuptools.build_meta"
    [project]
    name = "fmt"
    version = "1"
    dependencies = ["attrs"]
    [project.optional-dependencies]
    tests = ["pytest"]
    format = ["rfc3339-validator", "webcolors>=1.11", "PyYAML"]
    format-nongpl = ["rfc3339-validator", "webcolors>=1.11", "rfc3986-validator"]
    plot = ["matplotlib"]
    docs = ["sphinx"]
    native = ["fmt-rs-backend"]
    attrs = ["attrs>=23"]
    fast = ["orjson"]
    """


def test_an_extra_backing_an_optional_import_of_the_package_is_installed(tmp_path: Path) -> None:
    """jsonschema 4.26.0: `_format.py` imports the `format` extra's modules under suppress(ImportError) or
    try/except ImportError (rfc3986_validator, of `format-nongpl`, only as the fallback of rfc3987), and
    ~425 format tests skip without them; lazily imported matplotlib backs `plot`."""
    write(tmp_path, {
        "pyproject.toml": _OPTIONAL_PYPROJECT,
        "fmt/__init__.py": "import attrs\n",
        "fmt/_format.py": (
            "from contextlib import suppress\nimport contextlib\n\n"
            "try:\n    import rfc3339_validator\nexcept ImportError:\n    from rfc3986_validator import validate\n"
            "with contextlib.suppress(ModuleNotFoundError):\n    import webcolors\n"
            "with suppress(ImportError):\n    import yaml.loader\n"
        ),
        "fmt/plot.py": "def draw():\n    import matplotlib.pyplot as plt\n    return plt\n",
        "tests/test_f.py": "import fmt\n\ndef test_f():\n    pass\n",
    })
    spec = detect_env(tmp_path)
    assert spec.install_target == ".[tests,format,plot]"
    note = next(n for n in spec.notes if "does not declare" in n)
    assert "format: rfc3339_validator (guarded), webcolors (guarded), yaml (guarded)" in note
    assert "plot: matplotlib (lazy)" in note


def test_an_extra_whose_distribution_name_carries_a_py_tag_backs_its_module(tmp_path: Path) -> None:
    """markdown-it-py 4.3.0: ``main.py`` imports ``linkify_it`` under try/except ImportError, and its ``linkify``
    extra holds ``linkify-it-py``; the name was not matched to the module, so 31 linkify tests skipped (plain
    pytest 1190 passes, taskforge 1158)."""
    write(tmp_path, {
        "pyproject.toml": ('[project]\nname = "mdpkg"\nversion = "1.0"\n\n[project.optional-dependencies]\n'
                           'testing = ["pytest"]\nlinkify = ["linkify-it-py>=1,<3"]\nyaml = ["py-yaml-thing"]\n'),
        "mdpkg/__init__.py": "try:\n    import linkify_it\nexcept ImportError:\n    linkify_it = None\n",
        "tests/test_m.py": "import mdpkg\n\ndef test_m():\n    pass\n",
    })
    spec = detect_env(tmp_path)
    assert spec.install_target == ".[testing,linkify]", spec.notes


def test_extras_nobody_imports_or_never_test_extras_are_not_installed(tmp_path: Path) -> None:
    """docs (an excluded extra) is imported lazily, native (an accelerator: semver 3.1.2's Rust parser, tried
    before its own regex) under try/except ImportError, attrs only adds a declared dependency, fast's orjson
    and plot's matplotlib are imported by nobody, and format's modules only under ``if TYPE_CHECKING:`` or
    as the fallback of an ImportError handler."""
    write(tmp_path, {
        "pyproject.toml": _OPTIONAL_PYPROJECT,
        "fmt/__init__.py": (
            "from typing import TYPE_CHECKING\nimport attrs\nif TYPE_CHECKING:\n    import webcolors\n"
            "try:\n    from fmt_rs_backend import parse\nexcept ImportError:\n    parse = None\n"
            "try:\n    import json\nexcept ImportError:\n    import yaml\n"
        ),
        "fmt/docs.py": "def build():\n    import sphinx\n",
        "fmt/tests/test_in_package.py": "import matplotlib\n",
        "tests/test_f.py": "import fmt\n\ndef test_f():\n    pass\n",
    })
    spec = detect_env(tmp_path)
    assert spec.install_target == ".[tests]"
    assert not any("does not declare" in n for n in spec.notes)


_SETUP_LITERAL = """\
from setuptools import setup
open("RAN", "w").write("setup.py was executed")
setup(
    name="nat",
    version="1",
    packages=["nat"],
    extras_require={"fast": ["fastnumbers >= 2.0.0"], "yamlish": ["PyYAML >= 5"], "docs": ["sphinx"]},
)
"""
_SETUP_CONSTANT = """\
import setuptools
open("RAN", "w").write("setup.py was executed")
BASE = ["PyYAML >= 5"]
EXTRAS = {"fast": ("fastnumbers",), "yamlish": BASE + ["pyyaml-include"], "compat:python_version < '3.9'": ["mock"]}
setuptools.setup(name="nat", version="1", extras_require=EXTRAS)
"""
_SETUP_DICT_CALL = """\
from setuptools import setup
open("RAN", "w").write("setup.py was executed")
setup(name="nat", version="1", extras_require=dict(fast=["fastnumbers"], yamlish="PyYAML >= 5\\n# a comment"))
"""


@pytest.mark.parametrize("setup_py", [_SETUP_LITERAL, _SETUP_CONSTANT, _SETUP_DICT_CALL],
                         ids=["literal", "module-constant", "dict-call"])
def test_setup_py_extras_are_read_from_literals_never_run(tmp_path: Path, setup_py: str) -> None:
    """natsort 8.4.0: ``extras_require={"fast": [...], "icu": ["PyICU >= 1.0.0"]}`` in setup.py was read as names
    with no requirements, so no rule could see which modules an extra provides; an extra the tests import is
    chosen only when its requirements are known."""
    write(tmp_path, {"setup.py": setup_py, "nat/__init__.py": "",
                     "tests/test_y.py": "def test_y():\n    try:\n        import yaml\n    except ImportError:\n"
                                        "        return\n"})
    spec = detect_env(tmp_path)
    assert spec.install_target == ".[yamlish]", spec.notes
    assert not (tmp_path / "RAN").exists()


def test_setup_py_extras_not_statically_readable_keep_their_names_only() -> None:
    from generators.setup_py import setup_py_extras

    assert setup_py_extras(_SETUP_CONSTANT) == {"fast": ["fastnumbers"], "yamlish": ["PyYAML >= 5", "pyyaml-include"],
                                                "compat": ["mock; python_version < '3.9'"]}
    # one value read from a file: that extra keeps its name, the others their requirements
    assert setup_py_extras("setup(extras_require={'tests': open('t.txt').read().split(), 'y': ['PyYAML']})\n") == {
        "tests": [], "y": ["PyYAML"]}
    # ``**BASE``: which extras there are is not known from the call; the names written in it are kept, as before
    assert setup_py_extras("BASE = {'a': ['x']}\nsetup(extras_require={**BASE, 'y': ['PyYAML']})\n") == {"y": []}
    # a name changed in place after it is bound, or bound twice, is not a literal
    assert setup_py_extras("E = {'y': ['PyYAML']}\nE['all'] = ['z']\nsetup(extras_require=E)\n") == {}
    assert setup_py_extras("E = {'y': ['PyYAML']}\nE = {}\nsetup(extras_require=E)\n") == {}
    assert setup_py_extras("setup(extras_require=get_extras())\n") == {}
    # ``":marker"`` keys hold conditional install requirements, not extras (arrow 1.4.0's flit-made setup.py)
    assert setup_py_extras("setup(extras_require={\":python_version<'3.9'\": ['backports.zoneinfo'], "
                           "'t': ['a; os_name == \"nt\"']})\n") == {"t": ['a; os_name == "nt"']}
    assert setup_py_extras("setup(extras_require={'t': ['a; os_name == \"nt\"'], 't:python_version<\"3.9\"': "
                           "['b; os_name == \"nt\"']})\n") == {
        "t": ['a; os_name == "nt"', 'b; (os_name == "nt") and (python_version<"3.9")']}


_PRECONF_PYPROJECT = """
    [build-system]
    requires = ["setuptools"]
    build-backend = "setuptools.build_meta"
    [project]
    name = "conv"
    version = "1"
    dependencies = ["attrs"]
    [project.optional-dependencies]
    bson = ["pymongo>=4.4.0"]
    cbor2 = ["cbor2>=5"]
    msgpack = ["msgpack>=1"]
    orjson = ["orjson>=3"]
    pyyaml = ["PyYAML>=6"]
    tomlkit = ["tomlkit>=0.11"]
    ujson = ["ujson>=5"]
    msgspec = ["msgspec>=0.18"]
    attrs = ["attrs>=23"]
    fast = ["fastconv-rs"]
    """


def test_extras_a_test_file_imports_at_its_top_are_all_installed(tmp_path: Path) -> None:
    """cattrs 26.2.1: tests/test_preconf.py imports bson and cattrs.preconf.{msgpack,pyyaml,tomlkit,ujson}, whose
    first lines import the backends; with 3 extras at most, one was missing and none of the file collected.
    Extras imported under a guard or in a test stay capped at 3 (of attrs, cbor2, msgspec, orjson by name; attrs
    adds only a declared dependency, so not at the top), and an accelerator at the top is not installed."""
    write(tmp_path, {
        "pyproject.toml": _PRECONF_PYPROJECT,
        "src/conv/__init__.py": "import attrs\n",
        "src/conv/preconf/__init__.py": "from ..core import wrap\n",
        "src/conv/core.py": "def wrap():\n    pass\n",
        "src/conv/preconf/msgpack.py": "from msgpack import dumps\nfrom . import wrap\n",
        "src/conv/preconf/pyyaml.py": "import datetime\nfrom yaml import safe_dump\n",
        "src/conv/preconf/tomlkit.py": "from ..preconf import _tk\n",
        "src/conv/preconf/_tk.py": "import tomlkit.items\n",
        "src/conv/preconf/orjson.py": "import json\n",
        "src/conv/preconf/fast.py": "import fastconv_rs\n",
        "tests/test_preconf.py": (
            "import pytest\nimport attrs\nfrom bson import ObjectId\nfrom conv.preconf.msgpack import dumps\n"
            "from conv.preconf import pyyaml, tomlkit\nimport conv.preconf.fast\nimport conv.preconf.orjson\n"
            "try:\n    import cbor2\nexcept ImportError:\n    cbor2 = None\n"
            "ujson = pytest.importorskip('ujson')\n\n"
            "def test_json():\n    import ujson\n    import msgspec\n    import orjson\n"
        ),
    })
    spec = detect_env(tmp_path)
    assert spec.install_target == ".[bson,msgpack,pyyaml,tomlkit,attrs,cbor2,msgspec]", spec.notes
    assert "pymongo" not in spec.requirements  # the bson extra brings it
    note = next(n for n in spec.notes if "at the top of a test file" in n)
    assert "['bson', 'msgpack', 'pyyaml', 'tomlkit'] at the top" in note


def test_a_module_a_chosen_extra_provides_is_not_reported_unmapped(tmp_path: Path) -> None:
    """pyparsing 3.3.3's tests import railroad, which its chosen `diagrams` extra provides (railroad-diagrams),
    and cattrs' import bson (the `bson` extra: pymongo); both were reported 'not mapped to a distribution'.
    A module an extra provides that is not installed is named with it; only the rest is 'not mapped'."""
    write(tmp_path, {
        "pyproject.toml": """
            [project]
            name = "rr"
            [project.optional-dependencies]
            diagrams = ["railroad-diagrams", "jinja2"]
            icu = ["PyICU>=1"]
            bson = ["pymongo"]
            """,
        "rr/__init__.py": "", "rr/diagram.py": "import railroad\nimport jinja2\n",
        "tests/test_r.py": ("import rr.diagram\nimport railroad\nimport bson\nimport mysterymod\n\n"
                            "def test_icu():\n    try:\n        import icu\n    except ImportError:\n        pass\n"),
    })
    spec = detect_env(tmp_path)
    assert spec.install_target == ".[bson,diagrams]", spec.notes
    notes = "\n".join(spec.notes)
    assert "import 'railroad'" not in notes and "import 'bson'" not in notes
    assert "test files import 'icu', provided by extras ['icu'], not installed" in notes
    assert "guessed 'mysterymod'" in notes  # unguarded at the top: guessed, not only reported


@pytest.mark.realrepo
@pytest.mark.slow
@pytest.mark.parametrize(("name", "version", "target"), [
    ("jsonschema", "4.26.0", ".[format]"),  # plain `pip install -e .[format]` passes 7762 tests, `.` 7390
    ("semver", "3.1.2", "."),  # `native` (a Rust parser Version.parse tries first) is an accelerator
])
def test_extras_of_optional_imports_on_real_sdists(tmp_path: Path, name: str, version: str, target: str) -> None:
    import subprocess
    import sys
    import tarfile

    dl = tmp_path / "dl"
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
                           "-d", str(dl), f"{name}=={version}"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-500:]
    with tarfile.open(next(dl.glob(f"{name}-{version}.tar.gz"))) as tar:
        tar.extractall(tmp_path, filter="data")
    spec = detect_env(tmp_path / f"{name}-{version}", python="3.11")
    assert spec.install_target == target, spec.notes


def _sdist(tmp_path: Path, pin: str) -> Path:
    """The unpacked sdist of ``pin`` (``name==version``), fetched as ``taskforge generate pypi:...`` would."""
    from generators.sources import resolve_source

    return resolve_source(f"pypi:{pin}", tmp_path / "work").path


@pytest.mark.realrepo
@pytest.mark.slow
def test_python_dotenv_tox_factor_deps_with_braces_are_installed(tmp_path: Path) -> None:
    """python-dotenv 1.2.4's tox.ini has ``py{310,311,...,pypy3}: ipython``; the brace group was not expanded,
    ipython was left out and its 3 IPython tests skipped (257 vs plain pytest's 260 on the held-out probe)."""
    spec = detect_env(_sdist(tmp_path, "python-dotenv==1.2.4"), python="3.11")
    assert "ipython" in spec.requirements, spec.notes


def test_a_hatch_test_environment_is_a_requirement_set(tmp_path: Path) -> None:
    """soupsieve 4.1.4 declares beautifulsoup4 and lxml only in ``[tool.hatch.envs.dev]``: without them 86 test
    files did not collect (4 reliable tests of plain pytest's 749)."""
    from generators.requirement_sets import _hatch_env

    pyproject = {"tool": {"hatch": {"envs": {
        "lint": {"dependencies": ["ruff"]},
        "dev": {"dependencies": ["pytest", "pytest-cov", "coverage", "mypy", "ruff", "build", "beautifulsoup4",
                                 "lxml>=5", "types-requests", "mkdocs-material"]}}}}}
    found = _hatch_env(pyproject)
    assert found is not None and found.origin == "hatch environment 'dev' of pyproject.toml"
    assert found.requirements == ("pytest", "pytest-cov", "coverage", "beautifulsoup4", "lxml>=5")
    pyproject["tool"]["hatch"]["envs"]["hatch-test"] = {"extra-dependencies": ["hypothesis"]}
    assert _hatch_env(pyproject).requirements == ("hypothesis",)  # hatch's own test env comes first
    assert _hatch_env({"tool": {"hatch": {"envs": {"docs": {"dependencies": ["mkdocs"]}}}}}) is None


@pytest.mark.realrepo
@pytest.mark.slow
def test_soupsieve_test_requirements_come_from_its_hatch_env(tmp_path: Path) -> None:
    spec = detect_env(_sdist(tmp_path, "soupsieve==4.1.4"), python="3.11")
    assert {"beautifulsoup4", "lxml"} <= set(spec.requirements), spec.notes
    assert "mypy" not in spec.requirements and "ruff" not in spec.requirements


def test_extras_a_setup_py_builds_in_code_are_read_from_the_sdist_metadata(tmp_path: Path) -> None:
    """textdistance 4.6.3: ``extras = {...}`` then ``extras["all"] = ...`` in setup.py, which no literal reading
    can trust; the sdist's PKG-INFO lists what setuptools computed. Its ``test`` extra (numpy) was never
    installed and 43 of its 198 tests failed."""
    write(tmp_path, {
        "setup.py": ("from setuptools import setup\nextras = {'test': ['pytest', 'numpy'], 'fast': ['rapidfuzz']}\n"
                     "extras['all'] = extras['fast']\nsetup(name='tdpkg', version='1.0', extras_require=extras)\n"),
        "PKG-INFO": ("Metadata-Version: 2.1\nName: tdpkg\nVersion: 1.0\nRequires-Dist: attrs\n"
                     "Requires-Dist: tomli; python_version < \"3.11\"\nProvides-Extra: test\n"
                     "Requires-Dist: pytest; extra == \"test\"\nRequires-Dist: numpy>=1.2; extra == \"test\"\n"
                     "Provides-Extra: fast\nRequires-Dist: rapidfuzz; extra == \"fast\"\nProvides-Extra: all\n"
                     "Requires-Dist: rapidfuzz; extra == \"all\"\nRequires-Dist: old-thing; python_version < \"3.0\" "
                     "and extra == \"all\"\n\nlong description\n"),
        "tdpkg/__init__.py": "",
        "tests/test_t.py": "import tdpkg\n\ndef test_t():\n    pass\n",
    })
    spec = detect_env(tmp_path)
    assert spec.install_target == ".[test]", spec.notes
    from generators.env_detect import metadata_extras

    extras = metadata_extras((tmp_path / "PKG-INFO").read_text(encoding="utf-8"))
    assert extras == {"test": ["pytest", "numpy>=1.2"], "fast": ["rapidfuzz"], "all": ["rapidfuzz"]}
