"""``SharedOriginals``: a grading's original tree is materialized once per process, not once per grading."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from taskforge.reward.workspace import DirectoryTrees, SharedOriginals


class Counting(DirectoryTrees):
    def __init__(self, source: Path) -> None:
        super().__init__(source)
        self.calls = 0

    def materialize(self, task, dest: Path) -> None:  # type: ignore[no-untyped-def]
        self.calls += 1
        super().materialize(task, dest)


def _repo(root: Path, name: str) -> Path:
    (root / name).mkdir(parents=True)
    (root / name / "mod.py").write_text(f"NAME = {name!r}\n")
    return root / name


def test_one_materialization_per_tree_and_no_eviction_while_in_use(tmp_path: Path) -> None:
    """docutils 0.23: every grading copied its original twice (1-2 s a grading, up to 7 a candidate)."""
    shared = SharedOriginals(size=1)
    task = SimpleNamespace(repo="a", instance_id="a__1", content_hash="0")
    a = Counting(_repo(tmp_path, "a"))
    with shared.use(a, task) as first:  # type: ignore[arg-type]
        with shared.use(a, task) as again:  # type: ignore[arg-type]
            assert again == first and (first / "mod.py").read_text() == "NAME = 'a'\n"
        b = Counting(_repo(tmp_path, "b"))
        with shared.use(b, task) as other:  # type: ignore[arg-type]
            assert other != first and (other / "mod.py").read_text() == "NAME = 'b'\n"
        assert first.is_dir()  # in use: kept although the cache holds one tree
    assert a.calls == 1 and b.calls == 1
    with shared.use(Counting(_repo(tmp_path, "c")), task):  # type: ignore[arg-type]
        pass
    assert not first.exists() and not other.exists()  # unused and beyond the size: removed


def test_a_provider_without_a_cache_key_gets_a_tree_of_its_own_per_grading(tmp_path: Path) -> None:
    class Plain:
        calls = 0

        def materialize(self, task, dest: Path) -> None:  # type: ignore[no-untyped-def]
            Plain.calls += 1
            (dest / "x.py").write_text("x = 1\n")

    shared = SharedOriginals()
    seen = []
    for _ in range(2):
        with shared.use(Plain(), SimpleNamespace()) as tree:  # type: ignore[arg-type]
            seen.append(tree)
            assert (tree / "x.py").is_file()
        assert not tree.exists()
    assert Plain.calls == 2 and len(seen) == 2


def _grade_in_a_worker(source: str) -> str:
    from types import SimpleNamespace

    from taskforge.reward.reward import _ORIGINALS as shared  # the process's one, as gradings use it
    from taskforge.reward.workspace import DirectoryTrees

    with shared.use(DirectoryTrees(Path(source)), SimpleNamespace(repo="a")) as tree:  # type: ignore[arg-type]
        return str(tree)


def test_a_pool_worker_removes_its_trees_when_it_exits(tmp_path: Path) -> None:
    """A forked pool worker exits without atexit handlers: its shared trees went on filling /tmp. It starts with
    none of its parent's (their removal is the parent's), whatever this process graded before."""
    import multiprocessing

    _grade_in_a_worker(str(_repo(tmp_path, "before")))  # this process now holds a tree of its own
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        tree = Path(pool.apply(_grade_in_a_worker, (str(_repo(tmp_path, "a")),)))
        assert tree.is_dir()
        pool.close()
        pool.join()
    assert not tree.exists() and not tree.parent.exists()
