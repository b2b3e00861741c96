"""Audit: fingerprints (body yes, name/signature/docstring no), every blob form, every channel, cost."""

from __future__ import annotations

import hashlib
import io
import json
import marshal
import py_compile
import shutil
import tarfile
import time
import zipfile
from pathlib import Path

import git
import pytest
from _leak_task import TINY_MODULE, LeakTask, tiny_task

from taskforge.audit.audit import audit, audit_task_workspace
from taskforge.audit.fingerprints import FingerprintSet, fingerprint
from taskforge.audit.leak_scan import Scanner
from taskforge.core.task import AuditResult

BODY = 'words = re.findall(r"[A-Za-z0-9]+", text.lower())'


@pytest.fixture
def task(tmp_path: Path) -> LeakTask:
    return tiny_task(tmp_path)


def _audit(t: LeakTask, **kw) -> AuditResult:  # type: ignore[no-untyped-def]
    return audit_task_workspace(t.workspace, t.deleted, allowed_text=[t.problem], **kw)


def _fps(t: LeakTask) -> FingerprintSet:
    remaining = [(t.workspace / t.module).read_bytes()]
    return fingerprint(t.deleted, remaining, [t.problem])


def test_fingerprints_cover_the_body_not_name_signature_or_docstring(task: LeakTask) -> None:
    fps = _fps(task)
    texts = {f.text for f in fps.fingerprints}
    assert 'words=re.findall(r"[A-Za-z0-9]+",text.lower())' in texts
    assert "[A-Za-z0-9]+" in texts and "untitled-slug-fallback" in texts  # byte-code constants
    assert any(f.kind == "names" and "findall" in f.text for f in fps.fingerprints)
    assert not any("defslugify" in t or "Lower-case" in t for t in texts)
    assert not any(t in ("returnNone", "pass") for t in texts)
    assert FingerprintSet.from_dict(fps.to_dict()) == fps


def test_lines_also_in_remaining_code_or_allowed_text_are_dropped(task: LeakTask) -> None:
    remaining = [(task.workspace / task.module).read_bytes() + b"\ndef other(text):\n    " + BODY.encode()
                 + b"\n    return words\n"]
    texts = {f.text for f in fingerprint(task.deleted, remaining).fingerprints}
    assert 'words=re.findall(r"[A-Za-z0-9]+",text.lower())' not in texts
    texts = {f.text for f in fingerprint(task.deleted, (), ["hint: return joined.strip(sep) or ..."]).fingerprints}
    assert "returnjoined.strip(sep)or\"untitled-slug-fallback\"" in texts  # only the exact line is allowed
    texts = {f.text for f in fingerprint(task.deleted, (), ['return joined.strip(sep) or "untitled-slug-fallback"'])
             .fingerprints}
    assert "returnjoined.strip(sep)or\"untitled-slug-fallback\"" not in texts


def test_a_line_of_exactly_ngram_tokens_found_in_remaining_code_is_dropped_with_its_ngram_twin() -> None:
    """docutils 0.23: ``msg = self.document.reporter.error(`` is 10 tokens, a ``line`` and an ``ngram``
    fingerprint of the same text; only the line one was dropped as remaining code, and the leak scan found
    its twin there (10 of docutils' 20 leak_found rejections)."""
    line = "msg = self.document.reporter.error("
    deleted = {"pkg.mod.visit": f"def visit(self, node):\n    {line}\n        'bad node', base_node=node)\n"
                                "    raise nodes.SkipNode\n"}
    remaining = [f"def other(self, node):\n    {line}\n        'other', base_node=node)\n".encode()]
    kept = fingerprint(deleted, remaining).fingerprints
    assert not [f for f in kept if f.text == "msg=self.document.reporter.error("], kept


def test_clean_task_passes_with_problem_statement_revealing_signature(task: LeakTask) -> None:
    (task.workspace / "PROBLEM.md").write_text(task.problem)
    result = _audit(task)
    assert result.passed, result.hits
    assert result.channels == ("workspace", "git") and result.fingerprints > 10 and result.seconds > 0
    assert AuditResult.from_dict(result.to_dict()) == result


def test_reformatted_copy_is_found_by_ngrams(task: LeakTask) -> None:
    (task.workspace / "notes.txt").write_text("words = re.findall(\n    r'[A-Za-z0-9]+',  text.lower()\n)\n"
                                              "joined = sep.join(w for w in words\n  if w not in _STOP_WORDS)\n")
    result = _audit(task)
    assert [h.path for h in result.hits] == ["notes.txt"]


def test_copy_of_the_module_inside_the_workspace_is_not_taken_for_remaining_code(task: LeakTask) -> None:
    (task.workspace / "minipkg" / "textops_orig.py").write_text(TINY_MODULE)
    result = _audit(task)
    assert any(h.path == "minipkg/textops_orig.py" for h in result.hits), result.hits


def _scan(t: LeakTask, data: bytes, name: str) -> list[str]:
    return [h.evidence() for h in Scanner(_fps(t)).scan(data, name)]


def test_blob_forms(task: LeakTask, tmp_path: Path) -> None:
    src = task.original_module.read_text()
    assert _scan(task, json.dumps({"source": src}).encode(), "cache.json")  # JSON-escaped
    html = "<pre>" + src.replace("re.findall", '<span class="n">re</span>.<b>findall</b>').replace(
        '"', "&quot;") + "</pre>"
    assert _scan(task, html.encode(), "textops.html")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("minipkg/textops.py", src)
    hits = Scanner(_fps(task)).scan(buf.getvalue(), "minipkg-1.0-py3-none-any.whl")
    assert [h.where for h in hits] == ["minipkg/textops.py"]
    tbuf = io.BytesIO()
    with tarfile.open(fileobj=tbuf, mode="w:gz") as tf:
        info = tarfile.TarInfo("minipkg-1.0/minipkg/textops.py")
        info.size = len(src.encode())
        tf.addfile(info, io.BytesIO(src.encode()))
    hits = Scanner(_fps(task)).scan(tbuf.getvalue(), "abc.body")
    assert [h.where for h in hits] == ["minipkg-1.0/minipkg/textops.py"]
    assert not _scan(task, (task.workspace / task.module).read_bytes(), "textops.py")


def test_pyc_matched_on_code_names_even_without_string_constants(task: LeakTask, tmp_path: Path) -> None:
    bare = TINY_MODULE.replace('r"[A-Za-z0-9]+"', '"[a-z]+"').replace('"untitled-slug-fallback"', '"x"')
    assert "[A-Za-z0-9]" not in bare and "untitled" not in bare
    (tmp_path / "bare.py").write_text(bare)
    pyc = tmp_path / "bare.pyc"
    py_compile.compile(str(tmp_path / "bare.py"), cfile=str(pyc), doraise=True)
    assert marshal.loads(pyc.read_bytes()[16:])  # a real pyc of this interpreter
    evidence = _scan(task, pyc.read_bytes(), "textops.cpython-311.pyc")
    assert evidence and "names" in evidence[0] and "byte code" in evidence[0]
    stub_pyc = tmp_path / "stub.pyc"
    py_compile.compile(str(task.workspace / task.module), cfile=str(stub_pyc), doraise=True)
    assert not _scan(task, stub_pyc.read_bytes(), "textops.cpython-311.pyc")


def test_git_pointers_and_unreadable_store(task: LeakTask, tmp_path: Path) -> None:
    (task.workspace / ".git" / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (task.workspace / ".git" / "objects" / "info" / "alternates").write_text(str(task.original / ".git/objects"))
    result = _audit(task)
    assert any(h.path.endswith("alternates") for h in result.hits)
    shutil.rmtree(task.workspace / ".git")
    (task.workspace / ".git").write_text(f"gitdir: {task.original / '.git'}\n")
    assert any("pointer" in h.evidence for h in _audit(task).hits)
    (task.workspace / ".git").unlink()
    (task.workspace / ".git").mkdir()
    (task.workspace / ".git" / "HEAD").write_text("garbage")
    (task.workspace / ".git" / "objects").mkdir()
    assert any("could not be read" in h.evidence for h in _audit(task).hits)


def test_rebase_patch_files_in_gitdir_are_searched(task: LeakTask) -> None:
    patch = "\n".join("+" + line for line in TINY_MODULE.splitlines())
    (task.workspace / ".git" / "rebase-apply").mkdir()
    (task.workspace / ".git" / "rebase-apply" / "patch").write_text(patch)
    assert [h.path for h in _audit(task).hits] == [".git/rebase-apply/patch"]


def test_environment_dir_and_pth_pointer(task: LeakTask, tmp_path: Path) -> None:
    env = tmp_path / "env"
    site = env / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "unrelated.py").write_text("def f():\n    return 1\n")
    assert _audit(task, env_dir=env).passed
    (site / "dev.pth").write_text(f"{task.original}\n")
    result = _audit(task, env_dir=env)
    assert result.channels == ("workspace", "git", "environment")
    assert [h.path for h in result.hits] == [f"lib/python3.11/site-packages/dev.pth -> {task.original_module}"]
    (site / "dev.pth").unlink()
    (site / "minipkg-1.0.dist-info").mkdir()
    (site / "minipkg-1.0.dist-info" / "direct_url.json").write_text(
        json.dumps({"url": f"file://{task.original}", "dir_info": {}}))
    hits = _audit(task, env_dir=env).hits
    assert [h.path for h in hits] == [f"lib/python3.11/site-packages/minipkg-1.0.dist-info/direct_url.json -> "
                                      f"{task.original_module}"]


def _layer_id(i: int) -> str:
    return f"{i:x}" * 64  # the legacy v1 id a classic docker-save stream names layer i by


def _layer_tar(files: dict[str, bytes]) -> bytes:
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as ltf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            ltf.addfile(info, io.BytesIO(data))
    return layer.getvalue()


class _FakeImage:
    """The docker SDK seam: ``save()`` yields a docker-save tar in chunks (classic layer.tar format);
    ``attrs["RootFS"]["Layers"]`` holds the layers' diff ids (sha256 of each layer tar), as docker's."""

    def __init__(self, layers: list[dict[str, bytes]], base: _FakeImage | None = None) -> None:
        self._tars = (base._tars if base else []) + [_layer_tar(files) for files in layers]
        self.diff_ids = [f"sha256:{hashlib.sha256(t).hexdigest()}" for t in self._tars]
        self.id = f"sha256:{hashlib.sha256(repr(self.diff_ids).encode()).hexdigest()}"
        self.attrs = {"RootFS": {"Type": "layers", "Layers": self.diff_ids}}
        self.saves = 0

    def label(self, i: int) -> str:
        """How a hit names layer ``i``: its diff id's first 12 hex digits."""
        return self.diff_ids[i].removeprefix("sha256:")[:12]

    def save(self, named: bool = False, chunk_size: int = 4096):  # type: ignore[no-untyped-def]
        self.saves += 1
        outer = io.BytesIO()
        with tarfile.open(fileobj=outer, mode="w") as otf:
            for i, data in reversed(list(enumerate(self._tars))):  # docker's order is not the layers' order
                info = tarfile.TarInfo(f"{_layer_id(i)}/layer.tar")
                info.size = len(data)
                otf.addfile(info, io.BytesIO(data))
            manifest = json.dumps([{"Layers": [f"{_layer_id(i)}/layer.tar" for i in range(len(self._tars))]}]).encode()
            info = tarfile.TarInfo("manifest.json")
            info.size = len(manifest)
            otf.addfile(info, io.BytesIO(manifest))
        data = outer.getvalue()
        return (data[i:i + chunk_size] for i in range(0, len(data), chunk_size))


def test_image_layers_even_when_a_later_layer_deletes_the_file(task: LeakTask) -> None:
    site = "usr/lib/python3.11/site-packages"
    leaky = _FakeImage([{f"{site}/minipkg/textops.py": task.original_module.read_bytes()},
                        {f"{site}/minipkg/.wh.textops.py": b""}])
    result = _audit(task, image=leaky)
    assert "image" in result.channels
    assert [h.path for h in result.hits] == [leaky.label(0) + f":/{site}/minipkg/textops.py"]
    assert _audit(task, image=_FakeImage([{f"{site}/other.py": b"x = 1\n"}])).passed


def test_image_cache_extracts_each_layer_once_across_images(task: LeakTask, tmp_path: Path) -> None:
    site = "usr/lib/python3.11/site-packages"
    base = _FakeImage([{"usr/lib/python3.11/os.py": b"import sys\n" * 50}])
    leaky = _FakeImage([{f"{site}/minipkg/textops.py": task.original_module.read_bytes()},
                        {f"{site}/minipkg/.wh.textops.py": b""}], base=base)
    first = _audit(task, image=leaky, image_cache=tmp_path / "cache")
    expected = [leaky.label(1) + f":/{site}/minipkg/textops.py"]
    assert [h.path for h in first.hits] == expected and leaky.saves == 1
    assert [h.path for h in _audit(task, image=leaky, image_cache=tmp_path / "cache").hits] == expected
    assert leaky.saves == 1  # the second audit searched the cache, it did not save the image again
    other = _FakeImage([{f"{site}/other.py": b"x = 1\n"}], base=base)
    assert _audit(task, image=other, image_cache=tmp_path / "cache").passed
    layers = sorted(p.name for p in (tmp_path / "cache" / "layers").iterdir())
    assert layers == sorted({d.removeprefix("sha256:")[:32] for d in leaky.diff_ids + other.diff_ids})  # base once
    assert [p.name.startswith(".") for p in (tmp_path / "cache" / "layers").iterdir()].count(True) == 0

    from taskforge.audit.image_layers import forget_cached_image

    forget_cached_image(tmp_path / "cache", leaky.id)  # its own layers go, the shared base stays
    assert sorted(p.name for p in (tmp_path / "cache" / "layers").iterdir()) == \
        sorted(d.removeprefix("sha256:")[:32] for d in other.diff_ids)


@pytest.mark.parametrize("cached", [False, True])
def test_base_image_layers_are_not_searched(task: LeakTask, tmp_path: Path, cached: bool) -> None:
    """The base image (a setting, built before any repository) is not searched, like the local sandbox's
    system interpreter; the layers the environment image adds on top still are."""
    site = "usr/lib/python3.11/site-packages"
    base = _FakeImage([{"usr/lib/python3.11/textops_twin.py": task.original_module.read_bytes()}])
    env = _FakeImage([{f"{site}/other.py": b"x = 1\n"}], base=base)
    cache = tmp_path / "cache" if cached else None
    assert _audit(task, image=env, image_cache=cache, base_image=base).passed
    found = _audit(task, image=env, image_cache=cache)  # no base given: every layer is searched
    assert [h.path for h in found.hits] == [env.label(0) + ":/usr/lib/python3.11/textops_twin.py"]
    leaky_env = _FakeImage([{f"{site}/minipkg/textops.py": task.original_module.read_bytes()}], base=base)
    hits = _audit(task, image=leaky_env, image_cache=cache, base_image=base).hits
    assert [h.path for h in hits] == [leaky_env.label(1) + f":/{site}/minipkg/textops.py"]
    stranger = _FakeImage([{"x.py": b"y = 2\n"}])  # not env's base: nothing is skipped
    assert not _audit(task, image=env, image_cache=cache, base_image=stranger).passed


def test_audit_cost_scales_to_thousands_of_files(task: LeakTask, tmp_path: Path) -> None:
    env = tmp_path / "env"
    chunk = (Path(git.__file__).parent / "cmd.py").read_bytes()  # real Python text, ~60 KB
    for i in range(2000):
        d = env / f"pkg{i % 40}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"m{i}.py").write_bytes(chunk[: 2000 + (i % 20) * 1000])
    start = time.perf_counter()
    result = audit(task.workspace, _fps(task), env_dir=env)
    elapsed = time.perf_counter() - start
    assert result.passed
    assert elapsed < 20, elapsed  # ~21 MB in 2000 files: one automaton pass each, not one per pattern


def _cli_dataset(tmp_path: Path, leak: bool) -> Path:
    import dataclasses

    from taskforge.dataset import DatasetWriter
    from tests.strategies import MINI_BROKEN, MINI_ORIGINAL, mini_task, unified_diff

    task, src = mini_task(tmp_path)
    if leak:  # a generator bug: the broken workspace keeps the deleted body in a notes file
        broken = {**MINI_BROKEN, "NOTES.md": "for _ in range(b):\n    result = add(result, a)\n"}
        task = dataclasses.replace(task, setup_patch=unified_diff(MINI_ORIGINAL, broken))
    root = tmp_path / "ds"
    with DatasetWriter(root) as w:
        w.add_repo_archive(task.repo, task.base_commit, src)
        w.add(task)
    return root


@pytest.mark.parametrize("leak", [False, True])
def test_cli_audit_rebuilds_workspaces_and_exits_nonzero_on_leak(tmp_path: Path, leak: bool) -> None:
    import typer
    from typer.testing import CliRunner

    from taskforge.cli import audit_cmd

    app = typer.Typer()
    app.callback()(lambda: None)
    audit_cmd.register(app)
    root = _cli_dataset(tmp_path, leak)
    result = CliRunner().invoke(app, ["audit", str(root), "--json"])
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    row = summary["results"]["mini__delete__mini.calc.mul-1a2b3c4d"]
    assert row["channels"] == ["workspace", "git"] and row["fingerprints"] > 0
    if leak:
        assert result.exit_code == 1, result.output
        assert summary["leaky"] == ["mini__delete__mini.calc.mul-1a2b3c4d"]
        assert [h["path"] for h in row["hits"]][0] == "NOTES.md"
        assert [h["channel"] for h in row["hits"]] == ["workspace", "git"]  # and its blob in the fresh commit
        assert "leak:" in result.output and "NOTES.md" in result.output
    else:
        assert result.exit_code == 0, result.output
        assert summary["clean"] == 1 and row["passed"]


def test_cli_audit_missing_dataset_is_one_line_error(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from taskforge.cli import audit_cmd

    app = typer.Typer()
    app.callback()(lambda: None)
    audit_cmd.register(app)
    result = CliRunner().invoke(app, ["audit", str(tmp_path / "nope")])
    assert result.exit_code == 1
    assert "error:" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("fmt", ["gz", "bz2", "xz"])
def test_compressed_tarballs(task: LeakTask, fmt: str) -> None:
    src = task.original_module.read_bytes()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=f"w:{fmt}") as tf:
        info = tarfile.TarInfo("minipkg-1.0/minipkg/textops.py")
        info.size = len(src)
        tf.addfile(info, io.BytesIO(src))
    hits = Scanner(_fps(task)).scan(buf.getvalue(), f"minipkg-1.0.tar.{fmt}")
    assert [h.where for h in hits] == ["minipkg-1.0/minipkg/textops.py"]


def test_nested_git_store_in_workspace_and_vcs_checkout_in_env(task: LeakTask, tmp_path: Path) -> None:
    from taskforge.audit.scrub import scrub_workspace

    vendored = task.workspace / "vendor" / "textops"
    shutil.copytree(task.original, vendored)  # a nested repository: its history holds the original
    (vendored / "minipkg" / "textops.py").write_text((task.workspace / task.module).read_text())
    result = _audit(task)
    assert any(h.channel == "git" and h.path.startswith("vendor/textops/.git:blob ") for h in result.hits)
    assert not any(h.channel == "workspace" for h in result.hits)
    report = scrub_workspace(task.workspace, [task.qualname])
    assert "vendor/textops/.git" in report.removed
    assert _audit(task).passed
    assert "vendor/textops/minipkg/textops.py" in git.Repo(task.workspace).git.ls_files().splitlines()
    env = tmp_path / "env"
    shutil.copytree(task.original, env / "src" / "minipkg")  # pip install -e git+...: a checkout in src/
    (env / "src" / "minipkg" / task.module).write_text("x = 1\n")
    hits = _audit(task, env_dir=env).hits
    assert [h.channel for h in hits] == ["environment"] and hits[0].path.startswith("src/minipkg/.git:")


def test_cli_audit_of_a_venv_reads_its_standard_library_too(tmp_path: Path) -> None:
    """``--env-dir VENV`` audits as generate does: the venv and the interpreter's standard library (channel
    ``interpreter``: zipfile holds zipp's code, and no sandbox can hide it)."""
    import sys

    import typer
    from typer.testing import CliRunner

    from taskforge.cli import audit_cmd

    app = typer.Typer()
    app.callback()(lambda: None)
    audit_cmd.register(app)
    root = _cli_dataset(tmp_path, False)
    result = CliRunner().invoke(app, ["audit", str(root), "--json", "--env-dir", sys.prefix])
    row = json.loads(result.stdout.strip().splitlines()[-1])["results"]["mini__delete__mini.calc.mul-1a2b3c4d"]
    assert row["channels"] == ["workspace", "git", "environment", "interpreter"], result.output
    assert result.exit_code == 0 and row["passed"], result.output


def test_a_constant_no_file_can_hold_as_utf8_is_not_a_fingerprint(tmp_path: Path) -> None:
    """ftfy 6.3.1: ``re.compile("[\\ud800-\\udfff]")`` compiles to a string with lone surrogates; fingerprinting
    it raised UnicodeEncodeError in every audit of the package (33 of 79 candidates ``internal_error``)."""
    from taskforge.audit.env_index import EnvironmentIndex
    from taskforge.audit.fingerprints import candidates_of

    source = ('def fix(text):\n    """Fix \\ud83d."""\n    pattern = "[\\ud800-\\udfff]+ and a long distinctive tail"\n'
              '    return SURROGATE_RE.sub(pattern, text, count=12345678)\n')
    fps = candidates_of({"pkg.fix": source})
    assert fps and all("\ud800" not in f.text for f in fps)
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "other.py").write_text("x = 1\n")
    assert EnvironmentIndex.build(tmp_path / "env", {"pkg.fix": source}).blobs == ()
