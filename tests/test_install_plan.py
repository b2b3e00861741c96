"""The install fallback steps (``sandboxes/install_plan.py``), and a real build that needs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandboxes.install_plan import InstallAttempt, fallback_notes, install_steps, unpin
from taskforge.core.environment import EnvSpec

TOOLING = ("pytest", "coverage>=7.4")


def test_unpin_keeps_extras_and_markers() -> None:
    assert unpin("attrs==24.3.0") == "attrs"
    assert unpin("pytest[testing]>=8,<9") == "pytest[testing]"
    assert unpin("tomli==2.0.1 ; python_version < '3.11'") == "tomli ; python_version < '3.11'"
    assert unpin("trio") == "trio"


def test_steps_go_from_pinned_to_plain_without_repeats() -> None:
    spec = EnvSpec(project_name="p", python="3.11", install_target=".[tests]", requirements=("attrs==24.3.0",))
    steps = install_steps(spec, TOOLING)
    assert [s.label for s in steps] == ["pinned", "unpinned", "extras", "plain"]
    assert steps[0].requirements == ("attrs==24.3.0", *TOOLING)
    assert steps[1].requirements == ("attrs", *TOOLING)
    assert steps[2].requirements == TOOLING and steps[2].install_target == ".[tests]"
    assert steps[3].install_target == "."
    bare = EnvSpec(project_name="p", python="3.11", install_target=".", requirements=("six",))
    assert [s.label for s in install_steps(bare, TOOLING)] == ["pinned", "extras"]  # unpinned == pinned


def test_optional_extras_are_dropped_from_the_end_before_the_test_extras() -> None:
    """env_detect lists the test extras first and the optional ones it adds after them: networkx's
    ``.[test,default,extra]`` holds pygraphviz, which does not build without graphviz's headers; that
    must not cost numpy/scipy (``default``) and the test extra too."""
    spec = EnvSpec(project_name="p", python="3.11", install_target=".[test,default,extra]",
                   requirements=("attrs==24.3.0",))
    steps = install_steps(spec, TOOLING)
    assert [(s.label, s.install_target) for s in steps] == [
        ("pinned", ".[test,default,extra]"), ("unpinned", ".[test,default,extra]"),
        ("extras", ".[test,default,extra]"), ("extras-2", ".[test,default]"), ("extras-1", ".[test]"),
        ("plain", ".")]
    assert steps[3].requirements == steps[1].requirements == ("attrs", *TOOLING)


def test_notes_name_every_failed_step_and_the_one_used() -> None:
    spec = EnvSpec(project_name="p", python="3.11", install_target=".", requirements=("x==1",))
    pinned, unpinned, extras = install_steps(spec, TOOLING)
    notes = fallback_notes([InstallAttempt(pinned, "exit 1: ResolutionImpossible"),
                            InstallAttempt(unpinned, "exit 1: no matching distribution")], extras)
    assert notes[0] == "install: step 'pinned' failed: exit 1: ResolutionImpossible"
    assert "'unpinned' failed" in notes[1] and notes[2].startswith("install: fell back to step 'extras'")
    assert fallback_notes([], pinned) == ()


def _build_tiny_project(spec: EnvSpec, repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A local build of ``spec`` for a one-package project named ``spec.project_name`` written at ``repo``."""
    from sandboxes.local import LocalSandbox
    from taskforge.core.settings import Settings
    from tests.fixtures_repos import write

    name = spec.project_name
    write(repo, {"pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = '
                                   f'"setuptools.build_meta"\n[project]\nname = "{name}"\nversion = "1"\n',
                 f"{name}/__init__.py": "", f"tests/test_{name}.py": "def test_it():\n    pass\n"})
    work = tmp_path_factory.getbasetemp() / "tf-shared-work"
    work.mkdir(exist_ok=True)
    return LocalSandbox(Settings(work_dir=work, install_timeout_s=300), confined=False).prepare(spec, repo)


@pytest.mark.slow
def test_local_build_falls_back_and_records_why(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """An impossible pin set (two pins of one name, as a union of locks gives) falls back to the names."""
    spec = EnvSpec(project_name="fb", python="3.11", install_target=".",
                   requirements=("iniconfig==2.0.0", "iniconfig==1.1.1"))
    env = _build_tiny_project(spec, tmp_path, tmp_path_factory)
    notes = "\n".join(env.spec.notes)
    assert "install: step 'pinned' failed" in notes
    assert "fell back to step 'unpinned'" in notes
    assert any(line.lower().startswith("iniconfig==") for line in env.frozen)
    assert env.spec.key == spec.key  # the notes are not part of the environment's identity


def test_runner_dependencies_come_from_the_environment_metadata(tmp_path: Path) -> None:
    """A fake site-packages: pytest needs pluggy; a plugin needs its own dependency; jinja2 is nobody's."""
    from sandboxes.runner_deps import refusal, runner_distributions

    def dist(name: str, requires: list[str], plugin: bool = False) -> None:
        d = tmp_path / f"{name}-1.0.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
                                    + "".join(f"Requires-Dist: {r}\n" for r in requires))
        if plugin:
            (d / "entry_points.txt").write_text(f"[pytest11]\n{name} = {name}.plugin\n")

    dist("pytest", ["pluggy<2,>=1.5", "iniconfig", "colorama; sys_platform == 'win32'",
                    "argcomplete; extra == 'dev'"])
    dist("pluggy", [])
    dist("iniconfig", [])
    dist("argcomplete", [])
    dist("pytest_mockish", ["mockdep>=1"], plugin=True)
    dist("mockdep", [])
    dist("Jinja2", ["MarkupSafe"])
    dist("hypothesis", ["attrs>=22.2.0", "sortedcontainers"], plugin=True)
    dist("attrs", [])
    chain = runner_distributions([tmp_path])
    assert chain["pluggy"] == "pytest -> pluggy" and chain["pytest-mockish"] == "pytest-mockish"
    assert "argcomplete" not in chain and "jinja2" not in chain
    assert "mockdep" not in chain and "attrs" not in chain  # a plugin's own requirements load lazily
    assert refusal("attrs", [tmp_path]) == ""  # attrs with hypothesis installed is testable
    assert "pytest -> pluggy" in refusal("pluggy", [tmp_path])  # the hook machinery the grading watches
    assert refusal("Jinja2", [tmp_path]) == ""
    assert refusal("pytest-mockish", [tmp_path]) == ""  # a plugin of its own: its tests load it
    assert refusal("pytest", [tmp_path]) != ""
    assert refusal("iniconfig", [tmp_path]) == ""  # pytest imports it: tested, its preloaded files kept whole


def test_runner_chain_from_a_pip_report_refuses_what_pytest_requires() -> None:
    """The docker resolve container reports ``requires_dist`` per distribution; the chain is the same."""
    from sandboxes.runner_deps import refusal_in, runner_chain

    requires = {"pytest": ["iniconfig>=1", "packaging", "pluggy<2,>=1.5", "pygments>=2.7.2",
                           "argcomplete; extra == \"dev\""],
                "iniconfig": [], "packaging": [], "pluggy": [], "Pygments": [], "argcomplete": [],
                "coverage": ["tomli; python_full_version <= \"3.11.0a6\""], "attrs": []}
    chain = runner_chain(requires)
    assert chain["pygments"] == "pytest -> pygments" and "argcomplete" not in chain and "attrs" not in chain
    assert "pytest -> pluggy" in refusal_in("pluggy", chain)
    assert refusal_in("attrs", chain) == "" and refusal_in("unknown", chain) == ""
    assert refusal_in("coverage", chain) != "" and refusal_in("pytest", chain) != ""


def test_a_dependency_pytest_imports_is_tested_and_marked() -> None:
    """iniconfig, packaging, pygments: no refusal (pytest imports their workspace copy; the profile learns
    which files load first); pytest, coverage and pluggy are refused; a plugin of its own is neither."""
    from sandboxes.runner_deps import refusal_in, runner_chain, runner_dependency

    requires = {"pytest": ["iniconfig>=1", "packaging", "pluggy<2,>=1.5", "pygments>=2.7.2"], "iniconfig": [],
                "packaging": [], "pluggy": [], "Pygments": [], "coverage": [], "pytest-mock": ["pytest>=6"]}
    chain = runner_chain(requires, ["pytest-mock"])
    for name in ("iniconfig", "packaging", "Pygments"):
        assert refusal_in(name, chain) == "" and runner_dependency(name, chain).startswith("pytest -> ")
    for name in ("pytest", "coverage", "pluggy"):
        assert refusal_in(name, chain) != "" and runner_dependency(name, chain) == ""
    assert refusal_in("pytest-mock", chain) == runner_dependency("pytest-mock", chain) == ""
    assert runner_dependency("attrs", chain) == ""


def test_runner_chain_evaluates_markers_for_the_test_interpreter() -> None:
    """pytest 9 requires ``exceptiongroup; python_version < "3.11"`` and ``colorama; sys_platform == "win32"``:
    a pytest under Python 3.11 on Linux imports neither, so both projects are testable there (before markers
    were read, both were refused as "imported by the test runner itself")."""
    from sandboxes.runner_deps import refusal_in, runner_chain

    requires = {"pytest": ['colorama>=0.4; sys_platform == "win32"', 'exceptiongroup>=1; python_version < "3.11"',
                           "iniconfig>=1", 'tomli>=1; python_version < "3.11"', "pluggy<2,>=1.5"],
                "colorama": [], "exceptiongroup": [], "tomli": [], "iniconfig": [], "pluggy": []}
    on_311 = runner_chain(requires, python_version="3.11.7")
    assert "exceptiongroup" not in on_311 and "tomli" not in on_311 and "colorama" not in on_311
    assert refusal_in("exceptiongroup", on_311) == "" and refusal_in("colorama", on_311) == ""
    assert on_311["iniconfig"] == "pytest -> iniconfig" and "pytest -> pluggy" in refusal_in("pluggy", on_311)
    on_310 = runner_chain(requires, python_version="3.10.14")
    assert on_310["exceptiongroup"] == "pytest -> exceptiongroup" and "colorama" not in on_310
    # a requirement string packaging cannot parse falls back to its name (and its extra marker)
    odd = runner_chain({"pytest": ["pluggy (>=1.5", "argcomplete; extra == 'dev' and"], "pluggy": [],
                        "argcomplete": []})
    assert "pluggy" in odd and "argcomplete" not in odd


def test_guessed_requirements_go_first_and_only_in_their_own_step() -> None:
    """dpath 2.2.0's tests import nose2, declared nowhere: a guessed distribution is tried in a first step of
    its own, so a wrong guess (no such distribution) costs that step and never the declared requirements."""
    spec = EnvSpec(project_name="p", python="3.11", install_target=".[tests]", requirements=("attrs==24.3.0",),
                   guessed_requirements=("nose2",))
    steps = install_steps(spec, TOOLING)
    assert [s.label for s in steps] == ["guessed", "pinned", "unpinned", "extras", "plain"]
    assert steps[0].requirements == ("attrs==24.3.0", "nose2", *TOOLING)
    assert all("nose2" not in s.requirements for s in steps[1:])
    plain = EnvSpec(project_name="p", python="3.11", install_target=".[tests]", requirements=("attrs==24.3.0",))
    assert spec.key != plain.key  # a guess changes what is installed
    assert EnvSpec.from_dict(plain.to_dict()).key == plain.key == EnvSpec.from_dict(
        {k: v for k, v in plain.to_dict().items() if k != "guessed_requirements"}).key  # old specs keep their key


@pytest.mark.slow
def test_a_wrong_guess_costs_its_own_step_only(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A guessed distribution that does not exist fails the ``guessed`` step; the declared set installs next."""
    spec = EnvSpec(project_name="gs", python="3.11", install_target=".", requirements=("iniconfig",),
                   guessed_requirements=("taskforge-no-such-distribution-0",))
    env = _build_tiny_project(spec, tmp_path, tmp_path_factory)
    notes = "\n".join(env.spec.notes)
    assert "install: step 'guessed' failed" in notes and "fell back to step 'pinned'" in notes, notes
    assert any(line.lower().startswith("iniconfig==") for line in env.frozen)
