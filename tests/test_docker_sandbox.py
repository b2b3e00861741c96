"""The docker sandbox gives the local sandbox's reports, from a source-free, cached environment image."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sandboxes.docker import DockerSandbox
from sandboxes.docker_images import VENV
from sandboxes.local import LocalSandbox
from sandboxes.protocol import RunRequest
from taskforge.core.environment import EnvSpec
from taskforge.core.errors import EnvironmentBuildError
from taskforge.core.settings import Settings
from taskforge.core.testreport import Outcome
from tests._docker_env import MINI_FILES, MINI_SPEC, require_base_image, require_docker, write_files

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    client = require_docker()
    settings = Settings.load({"work_dir": str(tmp_path_factory.mktemp("work"))})
    require_base_image(client, settings.base_image)
    repo = write_files(tmp_path_factory.mktemp("repo"), MINI_FILES)
    docker_box, local_box = DockerSandbox(settings, client), LocalSandbox(settings)
    return (docker_box, docker_box.prepare(MINI_SPEC, repo)), (local_box, local_box.prepare(MINI_SPEC, repo)), repo


def _comparable(out):
    r = out.report
    return r.outcomes(), r.exit_code, r.collection_errors, r.flags, r.timed_out, out.coverage


@pytest.mark.parametrize("request_", [
    RunRequest(),
    RunRequest(coverage=True),
    RunRequest(tests=("tests/test_mini.py::test_add", "tests/test_mini.py::test_halve[4]")),
    RunRequest(collect_only=True),
], ids=["suite", "coverage", "selected", "collect-only"])
def test_same_reports_as_local(both, request_):
    (docker_box, denv), (local_box, lenv), repo = both
    d, loc = docker_box.run(denv, repo, request_), local_box.run(lenv, repo, request_)
    assert _comparable(d) == _comparable(loc)
    assert d.report.results, d.report.output_tail


def test_suite_outcomes_are_right(both):
    (docker_box, denv), _, repo = both
    report = docker_box.run(denv, repo, RunRequest(coverage=True)).report
    assert report.outcome_of("tests/test_mini.py::test_version") is Outcome.PASSED  # dist-info metadata works
    assert report.outcome_of("tests/test_mini.py::test_wrong") is Outcome.FAILED
    assert report.outcome_of("tests/test_mini.py::test_xfail") is Outcome.XFAILED
    assert report.exit_code == 1


def test_deleted_code_fails_in_docker_as_in_local(both, tmp_path):
    (docker_box, denv), (local_box, lenv), repo = both
    ws = tmp_path / "broken"
    shutil.copytree(repo, ws)
    init = ws / "mini" / "__init__.py"
    init.write_text(init.read_text().replace("def halve(x):", "def _gone(x):"))
    d, loc = docker_box.run(denv, ws, RunRequest()), local_box.run(lenv, ws, RunRequest())
    assert _comparable(d) == _comparable(loc)
    assert d.report.collection_errors == ("tests/test_mini.py",)  # the import of halve fails
    assert not d.report.all_ok(["tests/test_mini.py::test_add"])


def test_image_holds_no_project_source_and_no_ca_bundle(both):
    (docker_box, denv), _, _ = both
    probe = (
        "import importlib.metadata as m, importlib.util as u, pathlib, sysconfig\n"
        "site = pathlib.Path(sysconfig.get_paths()['purelib'])\n"
        "assert u.find_spec('mini') is None, 'project importable from the image'\n"
        "assert m.version('mini') == '1.2.3'\n"
        "assert not list(site.glob('mini*.py')) and not (site / 'mini').exists()\n"
        "assert not (site / 'pip').exists() and not (site / 'setuptools').exists(), 'venv tools kept'\n"
        "assert list(site.glob('_pytest/__pycache__/*.pyc')), 'dependencies not byte-compiled'\n"
        "assert not list(pathlib.Path('/').glob('*/ca.pem')) and not pathlib.Path('/tf').exists()\n"
        "print('clean')\n"
    )
    out = docker_box.client.containers.run(denv.location, [f"{VENV}/bin/python", "-c", probe], remove=True,
                                           network_mode="none")
    assert out.decode().strip() == "clean"
    assert "six==" + "1.17.0" in denv.frozen or any(p.startswith("six==") for p in denv.frozen)
    assert not any(p.lower().startswith("mini==") for p in denv.frozen)


def test_image_is_cached_by_content_hash(both):
    (docker_box, denv), _, repo = both
    again = docker_box.prepare(MINI_SPEC, repo)
    assert again.location == denv.location and again.location.startswith("taskforge-env:")
    assert again.frozen == denv.frozen
    assert again.extra["image"] == denv.extra["image"] == denv.location  # tasks record it as image_name


def test_failed_build_names_its_kept_log(both, tmp_path):
    (docker_box, _), _, repo = both
    spec = EnvSpec(project_name="mini", python="3.11", install_target="./taskforge-no-such-dir",
                   requirements=("taskforge-no-such-package-xq7==0.0.1",))  # every fallback step fails
    with pytest.raises(EnvironmentBuildError, match=r"full log: .*docker-env-[0-9a-f]+\.log") as info:
        docker_box.prepare(spec, repo)
    log = Path(str(info.value).rsplit("full log: ", 1)[1].rstrip(")"))
    assert log.is_file() and "taskforge-no-such-package-xq7" in log.read_text()


def test_a_project_pytest_itself_imports_is_refused_before_an_image_is_built(tmp_path: Path) -> None:
    """pluggy runs pytest's hooks: the docker sandbox reads that pytest requires it from pip's report in its
    resolve container and refuses with the local sandbox's one-line reason instead of building an image
    that could never give a task (iniconfig, a plain dependency of pytest, is tested instead:
    test_runner_anchor)."""
    client = require_docker()
    settings = Settings.load({"work_dir": str(tmp_path / "work")})
    require_base_image(client, settings.base_image)
    repo = write_files(tmp_path / "repo", {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
                          '[project]\nname = "pluggy"\nversion = "1.7.0"\n',
        "pluggy/__init__.py": "def parse(text):\n    return text\n",
        "tests/test_parse.py": "from pluggy import parse\n\ndef test_parse():\n    assert parse('a') == 'a'\n"})
    spec = EnvSpec(project_name="pluggy", python="3.11", install_target=".", requirements=())
    with pytest.raises(EnvironmentBuildError, match=r"part of the test runner itself \(pytest -> pluggy\)"):
        DockerSandbox(settings, client).prepare(spec, repo)


def test_a_test_past_its_deadline_fails_in_docker_as_in_local(both, tmp_path):
    """``test_deadline_s`` (the battery's stand-ins) holds in a container: the looping test fails, the rest runs."""
    (docker_box, denv), (local_box, lenv), repo = both
    ws = tmp_path / "ws"
    shutil.copytree(repo, ws)
    (ws / "tests" / "test_loop.py").write_text("def test_spins():\n    while True:\n        pass\n\n"
                                               "def test_after():\n    pass\n")
    req = RunRequest(tests=("tests/test_loop.py",), timeout_s=60, test_deadline_s=1.0)
    d, loc = docker_box.run(denv, ws, req).report, local_box.run(lenv, ws, req).report
    want = {"tests/test_loop.py::test_spins": Outcome.FAILED, "tests/test_loop.py::test_after": Outcome.PASSED}
    assert d.outcomes() == loc.outcomes() == want, d.output_tail
    assert not d.timed_out
