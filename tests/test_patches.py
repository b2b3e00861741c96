"""Patches made by taskforge.core.patches must be accepted by the real `git apply` and restore exact bytes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskforge.core import patches
from taskforge.core.errors import PatchError


def _tree(root: Path, files: dict[str, str | None]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    patches.write_tree(files, root)
    return root


def test_modify_create_delete_and_no_newline(tmp_path: Path) -> None:
    before = {"pkg/a.py": "x = 1\ny = 2\n", "pkg/gone.py": "def f():\n    pass\n", "pkg/nonl.py": "a\nb",
              "empty_gone.txt": ""}
    after = {"pkg/a.py": "x = 1\ny = 3\n", "pkg/new.py": "z = 0", "pkg/nonl.py": "a\nc\n",
             "empty_new.txt": ""}
    p = patches.diff(before, after)
    assert "new file mode 100644" in p and "deleted file mode 100644" in p
    assert "\\ No newline at end of file" in p
    assert patches.patch_paths(p) == ["empty_gone.txt", "empty_new.txt", "pkg/a.py", "pkg/gone.py",
                                      "pkg/new.py", "pkg/nonl.py"]
    work = _tree(tmp_path / "w", before)
    patches.apply(p, work, check=True)
    patches.apply(p, work)
    got = patches.read_tree(work)
    assert got == {k: v for k, v in after.items() if v is not None}
    # and the reverse patch restores the original bytes
    patches.apply(patches.diff(after, before), work)
    assert patches.read_tree(work) == before


def test_git_apply_in_a_plain_git_checkout_too(tmp_path: Path) -> None:
    before = {"m.py": "a = 1\n"}
    work = _tree(tmp_path / "repo", before)
    subprocess.run(["git", "init", "-q", str(work)], check=True, timeout=30)
    p = patches.diff(before, {"m.py": "a = 2\n"})
    proc = subprocess.run(["git", "apply", "--check", "-"], input=p.encode(), cwd=work, capture_output=True,
                          timeout=30)
    assert proc.returncode == 0, proc.stderr


def test_workspace_nested_in_another_repo_gets_its_own_paths(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=30)
    work = _tree(tmp_path / "sub" / "ws", {"m.py": "a = 1\n"})
    patches.apply(patches.diff({"m.py": "a = 1\n"}, {"m.py": "a = 2\n"}), work)
    assert (work / "m.py").read_text() == "a = 2\n"


def test_patch_that_does_not_match_is_refused(tmp_path: Path) -> None:
    work = _tree(tmp_path / "w", {"m.py": "other\n"})
    p = patches.diff({"m.py": "a = 1\n"}, {"m.py": "a = 2\n"})
    assert not patches.applies(p, work)
    with pytest.raises(PatchError, match="does not apply"):
        patches.apply(p, work)
    assert (work / "m.py").read_text() == "other\n"


def test_paths_escaping_the_workspace_are_refused() -> None:
    with pytest.raises(PatchError):
        patches.diff({}, {"../evil.py": "x"})
    with pytest.raises(PatchError):
        patches.diff({}, {"/abs.py": "x"})


def test_split_and_task_patches(tmp_path: Path) -> None:
    original = {"pkg/core.py": "def f():\n    return 1\n\n\ndef g():\n    return 2\n",
                "tests/test_core.py": "def test_f():\n    pass\n", "tests/test_only_f.py": "def test():\n    pass\n"}
    broken = {"pkg/core.py": "def g():\n    return 2\n", "tests/test_core.py": "", "tests/test_only_f.py": None}
    is_test = lambda p: p.startswith("tests/")  # noqa: E731
    tp = patches.task_patches(original, broken, is_test)
    assert patches.patch_paths(tp.patch) == ["pkg/core.py"]
    assert patches.patch_paths(tp.test_patch) == ["tests/test_core.py", "tests/test_only_f.py"]
    code, tests = patches.split_patch(tp.setup_patch, is_test)
    assert patches.patch_paths(code) == ["pkg/core.py"] and len(patches.patch_paths(tests)) == 2
    work = _tree(tmp_path / "w", original)
    patches.apply(tp.setup_patch, work)
    assert patches.read_tree(work) == {k: v for k, v in broken.items() if v is not None}
    patches.apply(tp.test_patch, work)
    patches.apply(tp.patch, work)
    assert patches.read_tree(work) == original
    assert patches.TaskPatches.from_dict(tp.to_dict()) == tp


_text = st.lists(st.sampled_from(["a", "b", "x = 1", "", "  # c", "\t", "é", "def f():", "    return 0"]),
                 max_size=12).map("\n".join) | st.text(alphabet="ab\n \r\t", max_size=30)
_maps = st.dictionaries(st.sampled_from(["a.py", "pkg/b.py", "pkg/sub/c.txt", "d e.py"]), st.none() | _text,
                        max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=_maps, after=_maps)
def test_property_diff_then_git_apply_gives_back_exact_bytes(tmp_path_factory: pytest.TempPathFactory,
                                                             before: dict, after: dict) -> None:
    work = tmp_path_factory.mktemp("prop")
    patches.write_tree({k: v for k, v in before.items() if v is not None}, work)
    want = {k: v for k, v in before.items() if v is not None}
    want.update(after)
    want = {k: v for k, v in want.items() if v is not None}
    full_after = {**{k: before.get(k) for k in before}, **after}
    patches.apply(patches.diff({k: before.get(k) for k in full_after}, full_after), work)
    assert {k: (work / k).read_bytes() for k in patches.read_tree(work)} == {k: v.encode() for k, v in
                                                                             want.items()}
