"""Sources: every kind resolves to a pinned checkout in the work area; the original is never touched."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import git
import pytest

from generators.sources import _unpack, resolve_source
from taskforge.core.environment import normalise_name
from taskforge.core.errors import SourceError
from tests.fixtures_repos import commit_files, make_git_repo, write


def test_plain_directory_becomes_one_commit_repo_and_original_is_untouched(tmp_path: Path) -> None:
    src = write(tmp_path / "My_Proj", {"pkg/__init__.py": "X = 1\n", "README": "hi\n"})
    before = sorted(p.relative_to(src).as_posix() for p in src.rglob("*"))
    snap = resolve_source(str(src), tmp_path / "work")
    assert sorted(p.relative_to(src).as_posix() for p in src.rglob("*")) == before  # no .git added
    assert snap.name == "my-proj"
    repo = git.Repo(snap.path)
    assert len(list(repo.iter_commits())) == 1
    assert repo.head.commit.hexsha == snap.commit
    assert (Path(snap.path) / "pkg/__init__.py").read_text() == "X = 1\n"
    assert Path(snap.path).is_relative_to(tmp_path / "work" / "repos")


def test_same_content_same_commit_and_reused_dir(tmp_path: Path) -> None:
    a = write(tmp_path / "a" / "proj", {"m.py": "A = 1\n"})
    b = write(tmp_path / "b" / "proj", {"m.py": "A = 1\n"})
    sa = resolve_source(str(a), tmp_path / "work")
    sb = resolve_source(str(b), tmp_path / "work2")
    assert sa.commit == sb.commit  # fixed author/date: deterministic sha across work areas
    again = resolve_source(str(a), tmp_path / "work")
    assert again.path == sa.path
    (a / "m.py").write_text("A = 2\n")
    assert resolve_source(str(a), tmp_path / "work").commit != sa.commit


def test_local_git_repo_pinned_at_rev_and_origin_unchanged(tmp_path: Path) -> None:
    origin = make_git_repo(tmp_path / "origin", {"m.py": "V = 1\n"})
    first = origin.head.commit.hexsha
    origin.create_tag("v1")
    second = commit_files(origin, {"m.py": "V = 2\n"}, "second")
    head_snap = resolve_source(str(tmp_path / "origin"), tmp_path / "work")
    assert head_snap.commit == second
    assert (Path(head_snap.path) / "m.py").read_text() == "V = 2\n"
    tag_snap = resolve_source(str(tmp_path / "origin"), tmp_path / "work", rev="v1")
    assert tag_snap.commit == first
    assert (Path(tag_snap.path) / "m.py").read_text() == "V = 1\n"
    assert tag_snap.path != head_snap.path
    assert origin.head.commit.hexsha == second and not origin.is_dirty(untracked_files=True)


def test_git_url_clone_is_pinned(tmp_path: Path) -> None:
    origin = make_git_repo(tmp_path / "up", {"m.py": "V = 1\n"})
    sha = origin.head.commit.hexsha
    commit_files(origin, {"m.py": "V = 2\n"}, "second")
    snap = resolve_source(f"file://{tmp_path / 'up'}", tmp_path / "work", rev=sha[:10])
    assert snap.commit == sha
    assert (Path(snap.path) / "m.py").read_text() == "V = 1\n"
    assert snap.name == "up"


@pytest.mark.parametrize("source,needle", [
    ("/definitely/not/here", "does not exist"),
    ("pypi:inflection", "expected pypi:NAME==VERSION"),
    ("file:///definitely/not/a/repo.git", "cannot clone"),
])
def test_bad_sources_say_what_was_tried(tmp_path: Path, source: str, needle: str) -> None:
    with pytest.raises(SourceError) as err:
        resolve_source(source, tmp_path / "work")
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_rev_is_a_source_error(tmp_path: Path) -> None:
    make_git_repo(tmp_path / "origin", {"m.py": "V = 1\n"})
    with pytest.raises(SourceError, match="cannot resolve revision 'nope'"):
        resolve_source(str(tmp_path / "origin"), tmp_path / "work", rev="nope")


def _sdist(path: Path, members: dict[str, bytes], mtime: int = 1_600_000_000) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = mtime
            tf.addfile(info, io.BytesIO(data))
    return path


def test_pypi_sdist_unpacked_and_committed_deterministically(tmp_path: Path) -> None:
    # a pre-fetched sdist in the work area stands in for `pip download` (no network in unit tests)
    for work in (tmp_path / "w1", tmp_path / "w2"):
        d = work / "sdists" / "toy-pkg-1.0"
        d.mkdir(parents=True)
        _sdist(d / "toy_pkg-1.0.tar.gz", {"toy_pkg-1.0/toy_pkg/__init__.py": b"X = 1\n",
                                          "toy_pkg-1.0/.gitignore": b"*.py\n"})
    s1 = resolve_source("pypi:Toy_Pkg==1.0", tmp_path / "w1")
    s2 = resolve_source("pypi:toy-pkg==1.0", tmp_path / "w2")
    assert (s1.name, s1.version) == ("toy-pkg", "1.0")
    assert s1.commit == s2.commit
    assert s1.created_at.startswith("2020-09-13")  # newest member's mtime
    # files ignored by the sdist's own .gitignore are still committed
    assert "toy_pkg/__init__.py" in git.Repo(s1.path).git.ls_files().splitlines()
    assert resolve_source("pypi:toy-pkg==1.0", tmp_path / "w1") == s1  # cached alias


def test_unpack_refuses_path_traversal(tmp_path: Path) -> None:
    bad = _sdist(tmp_path / "evil-1.0.tar.gz", {"evil-1.0/ok.py": b"", "../escaped.py": b"boom"})
    with pytest.raises(SourceError, match="escapes"):
        _unpack(bad, tmp_path / "out")
    assert not (tmp_path / "escaped.py").exists()
    zbad = tmp_path / "evil-1.0.zip"
    with zipfile.ZipFile(zbad, "w") as zf:
        zf.writestr("evil-1.0/ok.py", "")
        zf.writestr("evil-1.0/../../escaped2.py", "boom")
    with pytest.raises(SourceError, match="escapes"):
        _unpack(zbad, tmp_path / "out2")
    assert not (tmp_path / "escaped2.py").exists()


def test_normalise_name() -> None:
    assert normalise_name("Foo_Bar.baz") == "foo-bar-baz"
