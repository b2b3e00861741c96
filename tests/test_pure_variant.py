"""The pure-Python variant: tasks from the fallbacks that a project's compiled extension modules hide.

``fastpkg`` has a real C module (``fastpkg/_speed.c``, built by pip) and a Python fallback of the same
function (``fastpkg/slow.py``), chosen at import as msgpack and simplejson choose theirs. With the module
served, the suite never runs the fallback; the variant profiles the source without it and validates the
fallback's candidates, and their tasks are graded without the module everywhere.
"""

from __future__ import annotations

import _json
import dataclasses
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from sandboxes import extensions
from taskforge.core.environment import EnvSpec
from taskforge.pipeline import variants
from taskforge.pipeline.generate import SourceSummary

SUFFIX = ".cpython-311-x86_64-linux-gnu.so"

SPEED_C = r'''
#include <Python.h>

static PyObject *checksum(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    long long total = 0;
    const unsigned char *p = buf.buf;
    for (Py_ssize_t i = 0; i < buf.len; i++) total = (total * 31 + p[i] + i) % 1000003;
    PyBuffer_Release(&buf);
    return PyLong_FromLongLong(total);
}

static PyMethodDef methods[] = {{"checksum", checksum, METH_VARARGS, "checksum"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speed", NULL, -1, methods};
PyMODINIT_FUNC PyInit__speed(void) { return PyModule_Create(&module); }
'''

PROJECT = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
                      '[project]\nname = "fastpkg"\nversion = "1.0"\n\n[tool.pytest.ini_options]\n'
                      'testpaths = ["tests"]\n',
    "setup.py": 'from setuptools import Extension, setup\n\n'
                'setup(packages=["fastpkg"], ext_modules=[Extension("fastpkg._speed", ["fastpkg/_speed.c"], '
                'optional=True)])\n',
    "fastpkg/_speed.c": SPEED_C,
    "fastpkg/__init__.py": 'try:\n    from fastpkg._speed import checksum\nexcept ImportError:\n'
                           '    from fastpkg.slow import checksum\n\nfrom fastpkg.words import shout, title_words\n\n'
                           '__all__ = ["checksum", "shout", "title_words"]\n',
    "fastpkg/slow.py": '"""The pure-Python fallback of fastpkg._speed."""\n\n\n'
                       'def checksum(data):\n    """A rolling checksum of ``data`` (bytes) modulo 1000003."""\n'
                       '    total = 0\n    for i, b in enumerate(data):\n'
                       '        total = (total * 31 + b + i) % 1000003\n    return total\n',
    "fastpkg/words.py": '"""Text helpers: the part of fastpkg that has no compiled twin."""\n\n\n'
                        'def shout(text):\n    """``text`` in capitals with one exclamation mark."""\n'
                        '    text = text.strip()\n    if not text:\n        return ""\n'
                        '    return text.upper().rstrip("!") + "!"\n\n\n'
                        'def title_words(text):\n    """Every word of ``text`` capitalised, single-spaced."""\n'
                        '    words = [w for w in text.split() if w]\n'
                        '    return " ".join(w[:1].upper() + w[1:].lower() for w in words)\n',
    "tests/test_checksum.py": 'import fastpkg\n\n\ndef test_empty():\n    assert fastpkg.checksum(b"") == 0\n\n\n'
                              'def test_abc():\n    assert fastpkg.checksum(b"abc") == 96387\n\n\n'
                              'def test_long():\n    assert fastpkg.checksum(bytes(range(256)) * 4) == 944139\n',
    "tests/test_words.py": 'from fastpkg import shout, title_words\n\n\n'
                           'def test_shout():\n    assert shout("  hello ") == "HELLO!"\n'
                           '    assert shout("hey!!") == "HEY!"\n    assert shout("") == ""\n\n\n'
                           'def test_title_words():\n    assert title_words("hello   wORLD") == "Hello World"\n'
                           '    assert title_words("") == ""\n',
}


def _checksum(data: bytes) -> int:
    total = 0
    for i, b in enumerate(data):
        total = (total * 31 + b + i) % 1000003
    return total


def test_the_fixture_expectations_are_the_fallbacks_values() -> None:
    assert (_checksum(b""), _checksum(b"abc"), _checksum(bytes(range(256)) * 4)) == (0, 96387, 944139)


def test_a_pure_spec_has_its_own_key_and_the_default_keeps_the_old_one() -> None:
    spec = EnvSpec(project_name="pkg", python="3.11", install_target=".")
    pure = dataclasses.replace(spec, compiled_extensions=False)
    assert pure.key != spec.key
    assert "compiled_extensions" not in spec.to_dict(exclude=("compiled_extensions",))
    assert EnvSpec.from_dict(pure.to_dict()) == pure and EnvSpec.from_dict(spec.to_dict()).key == spec.key


def test_a_pure_environment_keeps_no_compiled_module(tmp_path: Path) -> None:
    from sandboxes.local import strip_project_code

    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("")
    shutil.copyfile(_json.__file__, site / "pkg" / f"_json{SUFFIX}")
    dist = site / "pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "RECORD").write_text(f"pkg/__init__.py,,\npkg/_json{SUFFIX},,\npkg-1.0.dist-info/RECORD,,\n")
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "_json.c").write_text("")
    spec = EnvSpec(project_name="pkg", python="3.11", install_target=".", package_dirs=("pkg",),
                   compiled_extensions=False)
    removed, kept = strip_project_code(venv, spec, repo)
    assert kept == [] and f"pkg/_json{SUFFIX}" in removed
    assert not (venv / extensions.EXT_DIR).exists() and not (site / "_taskforge_ext.pth").exists()
    assert extensions.host_bundle(spec, repo, None) == {}  # type: ignore[arg-type]  # nothing built


def test_only_a_source_that_kept_compiled_modules_may_get_a_variant() -> None:
    assert variants.may_follow({"extension_modules": "msgpack._cmsgpack"}, True)
    assert not variants.may_follow({"extension_modules": "msgpack._cmsgpack"}, False)
    assert not variants.may_follow({}, True)


def _cand(strategy: str, entity: str) -> SimpleNamespace:
    return SimpleNamespace(candidate_id=f"{strategy}:{entity}", strategy=strategy, entity=entity)


def test_the_parts_split_a_budget_first_turns_then_the_variant_then_twins() -> None:
    """msgpack's main run alone ended on the stub/delete twins of Timestamp.to_bytes: 10 tasks, 9 entities."""
    order = [_cand("stub", "m.a"), _cand("delete", "m.b"), _cand("stub", "m.c"), _cand("delete", "m.a"),
             _cand("stub", "m.b")]  # interleaved: every entity's first candidate before any twin
    first, twins = variants.first_part(10), variants.twins_part(3)
    assert [c.candidate_id for c in first.take(order)] == ["stub:m.a", "delete:m.b", "stub:m.c"]
    assert [c.candidate_id for c in twins.take(order)] == ["delete:m.a", "stub:m.b"]
    assert first.first and not twins.first and twins.journal_suffix == "" and twins.run_suffix == "+twins"
    main = SimpleNamespace(covered_entities=lambda: [SimpleNamespace(qualname="m.a")])
    pure = variants.pure_part(main, 4)
    assert [c.entity for c in pure.take([_cand("stub", "m.a"), _cand("stub", "m.fallback.f")])] == ["m.fallback.f"]
    assert (pure.max_tasks, pure.journal_suffix, pure.first) == (4, "+pure", False)
    done = [SourceSummary("s", accepted={"stub": 6}), SourceSummary("s", accepted={"stub": 3})]
    assert variants.left(10, *done) == 1 and variants.left(5, *done) == 0 and variants.left(None, *done) is None


def test_two_parts_make_one_summary() -> None:
    a = SourceSummary("s", "pkg", candidates=10, accepted={"stub": 2}, funnel={"trivial_body": 3}, seconds=5.0)
    b = SourceSummary("s", "pkg", candidates=4, accepted={"stub": 1, "delete": 1}, funnel={"trivial_body": 1},
                      seconds=2.0)
    m = variants.merged(a, b)
    assert (m.candidates, m.accepted, m.funnel, m.seconds, m.tasks) == (
        14, {"stub": 3, "delete": 1}, {"trivial_body": 4}, 7.0, 4)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    from sandboxes.local import LocalSandbox
    from taskforge.core.settings import Settings
    from taskforge.dataset.reader import Dataset
    from taskforge.pipeline.executors import SyncExecutor
    from taskforge.pipeline.generate import GenerateOptions, generate

    root = tmp_path_factory.mktemp("pure")
    src = root / "fastpkg"
    for rel, text in PROJECT.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    settings = Settings.load({"work_dir": str(root / "work"), "baseline_runs": 2, "test_timeout_s": 300,
                              "install_timeout_s": 600, "sandbox": "local"})
    box = LocalSandbox(settings)
    [summary] = generate([str(src)], root / "out", settings, GenerateOptions(strategies=("stub", "delete")), SyncExecutor(),
                         sandbox=box)
    return SimpleNamespace(summary=summary, out=root / "out", settings=settings, box=box,
                           tasks=list(Dataset.open(root / "out").tasks()))


@pytest.mark.slow
def test_the_fallback_hidden_by_a_compiled_module_becomes_a_task_graded_without_it(generated) -> None:
    from taskforge.reward.reward import reward_many
    from taskforge.reward.workspace import DatasetTrees

    assert not generated.summary.error, generated.summary
    by_entity = {t.entities[0]: t for t in generated.tasks}
    assert "fastpkg.words.shout" in by_entity and "fastpkg.slow.checksum" in by_entity, sorted(by_entity)
    fallback = by_entity["fastpkg.slow.checksum"]
    assert not fallback.env_spec.compiled_extensions
    assert {"tests/test_checksum.py::test_abc", "tests/test_checksum.py::test_long"} <= set(fallback.fail_to_pass)
    assert by_entity["fastpkg.words.shout"].env_spec.compiled_extensions  # the main run's task keeps the module
    results = reward_many([(fallback, fallback.patch), (fallback, "")], sandbox=generated.box,
                          trees=DatasetTrees(generated.out), settings=generated.settings)
    assert [r.score for r in results] == [1.0, 0.0], results


REBUILD = """\
import importlib.util, os, subprocess, sys, sysconfig, tempfile

_out = os.path.join(tempfile.mkdtemp(), "_speed" + sysconfig.get_config_var("EXT_SUFFIX"))
subprocess.run(["gcc", "-shared", "-fPIC", "-I" + sysconfig.get_paths()["include"],
                os.path.join(os.path.dirname(__file__), "_speed.c"), "-o", _out], check=True)
_spec = importlib.util.spec_from_file_location("fastpkg._speed", _out)
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
sys.modules["fastpkg._speed"] = _mod
"""


@pytest.mark.slow
def test_the_fallback_task_comes_without_the_native_sources_a_patch_could_build_again(generated) -> None:
    """The attack: leave the stub and build the compiled path from the workspace's C source at import. The
    setup removes the source (the gold patch does not bring it back, the statement does not ask for it)."""
    from taskforge.core.patches import diff
    from taskforge.reward.reward import reward_many
    from taskforge.reward.workspace import DatasetTrees

    fallback = next(t for t in generated.tasks if t.entities[0] == "fastpkg.slow.checksum")
    assert "deleted file mode" in fallback.setup_patch and "b/fastpkg/_speed.c" not in fallback.setup_patch.split(
        "diff --git a/fastpkg/_speed.c")[0] and "fastpkg/_speed.c" in fallback.setup_patch
    assert "_speed.c" not in fallback.patch and "_speed.c" not in fallback.problem_statement
    main = next(t for t in generated.tasks if t.entities[0] == "fastpkg.words.shout")
    assert "_speed.c" not in main.setup_patch  # the main run's tasks keep every file
    init = PROJECT["fastpkg/__init__.py"]
    attack = diff({"fastpkg/__init__.py": init}, {"fastpkg/__init__.py": REBUILD + init})
    # the monitor's zeroing off: it is a soft layer (it flags this subprocess call; an obfuscated one evades it).
    # With the C source in the workspace, this attack scored 1.0 here
    lenient = dataclasses.replace(generated.settings, monitor_zero=False)
    [res] = reward_many([(fallback, attack)], sandbox=generated.box, trees=DatasetTrees(generated.out),
                        settings=lenient)
    assert res.score == 0.0 and res.fraction == 0.0, res


@pytest.mark.slow
def test_with_the_compiled_module_served_the_fallback_stub_would_pass(generated) -> None:
    """Why the variant's tasks must be graded without the module: with it, the stubbed fallback never runs."""
    from taskforge.reward.reward import reward_many
    from taskforge.reward.workspace import DatasetTrees

    fallback = next(t for t in generated.tasks if t.entities[0] == "fastpkg.slow.checksum")
    served = dataclasses.replace(fallback, env_spec=dataclasses.replace(fallback.env_spec, compiled_extensions=True))
    [empty] = reward_many([(served, "")], sandbox=generated.box, trees=DatasetTrees(generated.out),
                          settings=generated.settings)
    assert empty.fraction == 1.0


@pytest.mark.slow
@pytest.mark.docker
def test_docker_grades_the_fallback_task_without_the_module(generated) -> None:
    """The docker image of the variant's spec ships no compiled module: gold 1, the empty patch 0."""
    from sandboxes.docker import DockerSandbox
    from taskforge.reward.reward import reward_many
    from taskforge.reward.workspace import DatasetTrees
    from tests._docker_env import require_base_image, require_docker

    require_base_image(require_docker(), generated.settings.base_image)
    fallback = next(t for t in generated.tasks if t.entities[0] == "fastpkg.slow.checksum")
    results = reward_many([(fallback, fallback.patch), (fallback, "")], sandbox=DockerSandbox(generated.settings),
                          trees=DatasetTrees(generated.out), settings=generated.settings)
    assert [r.score for r in results] == [1.0, 0.0], results
