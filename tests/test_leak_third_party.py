"""The leak audit in third-party files: an installed or vendored copy is a leak, a shared idiom is not.

Uses the real ``pygments/util.py`` of this interpreter's environment: its ``guess_decode`` shares three
body lines (``text = text.decode('utf-8')``, ``except UnicodeDecodeError:``, ``text = text.decode('latin1')``)
with the deleted function below, as unrelated packages do.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pygments.util

from taskforge.audit.audit import audit_task_workspace
from taskforge.audit.fingerprints import fingerprint
from taskforge.audit.leak_scan import Scanner

DELETED = '''def read_source(path):
    """Read a source file, whatever its encoding."""
    with open(path, "rb") as fh:
        text = fh.read()
    try:
        text = text.decode('utf-8')
    except UnicodeDecodeError:
        text = text.decode('latin1')
    lines = [line.rstrip("\\r") for line in text.split("\\n")]
    return "\\n".join(lines).expandtabs(4)
'''


def _env(tmp: Path) -> Path:
    site = tmp / "env" / "lib" / "python3.11" / "site-packages" / "pygments"
    site.mkdir(parents=True)
    shutil.copy(pygments.util.__file__, site / "util.py")
    return tmp / "env"


def _workspace(tmp: Path) -> Path:
    ws = tmp / "ws"
    (ws / "proj").mkdir(parents=True)
    (ws / "proj" / "io.py").write_text("def read_source(path):\n    raise NotImplementedError\n")
    return ws


def test_shared_generic_lines_in_a_third_party_file_are_no_leak(tmp_path: Path) -> None:
    ws, env = _workspace(tmp_path), _env(tmp_path)
    fps = fingerprint({"proj.io.read_source": DELETED})
    shared = {f.text for f in fps.fingerprints if f.kind == "line"} & {
        "text=text.decode('utf-8')", "exceptUnicodeDecodeError:", "text=text.decode('latin1')"}
    assert len(shared) == 3  # the lines really are fingerprints, and pygments really has them
    result = audit_task_workspace(ws, {"proj.io.read_source": DELETED}, env_dir=env)
    assert result.passed, result.hits
    # outside the environment (the agent's own tree, git objects) any two body lines still count
    data = Path(pygments.util.__file__).read_bytes()
    assert Scanner(fps).scan(data, "util.py") and not Scanner(fps).scan(data, "util.py", strict=True)


def test_an_installed_copy_in_the_environment_is_found(tmp_path: Path) -> None:
    ws, env = _workspace(tmp_path), _env(tmp_path)
    copy = env / "lib/python3.11/site-packages/proj_vendored/io.py"
    copy.parent.mkdir(parents=True)
    copy.write_text("import os\n\n\n" + DELETED)
    result = audit_task_workspace(ws, {"proj.io.read_source": DELETED}, env_dir=env)
    assert [(h.channel, h.path) for h in result.hits] == [("environment",
                                                           "lib/python3.11/site-packages/proj_vendored/io.py")]


def test_class_body_names_and_own_qualname_are_no_fingerprints() -> None:
    fps = fingerprint({"proj.Thing": "class Thing:\n    pass\n", "proj.LongerName": "class LongerName:\n    x = 1\n"})
    assert not [f for f in fps.fingerprints if f.kind == "names"]  # __name__, __module__, __qualname__
    assert not [f for f in fps.fingerprints if f.kind == "const" and f.text in ("LongerName", "__qualname__")]


def test_a_short_body_whose_lines_are_the_modules_idiom_is_no_copy() -> None:
    # marshmallow 4.4.0 fields.UUID: its short lines recur in the other fields of fields.py, which made the
    # remaining fields.py count as a "copy" of the body, so its lines were kept and found: leak_found
    deleted = "def _deserialize(self, value):\n    value = self._prep(value)\n    return self._validated(value)\n"
    remaining = (b"class Str:\n    def _deserialize(self, value):\n        value = self._prep(value)\n"
                 b"        return self._validated(value)\n")
    fps = fingerprint({"proj.fields.UUID._deserialize": deleted}, [remaining])
    assert not [f for f in fps.fingerprints if f.kind == "line"]  # dropped: the remaining code has them


def test_the_environment_index_gives_the_verdict_of_a_full_read(tmp_path: Path) -> None:
    """``EnvironmentIndex``: the environment read once with every entity's fingerprints; each candidate's audit
    then finds exactly what reading the environment again would (an installed copy, a copy in a wheel, the
    byte code of the module; not the shared idioms of pygments), and a set it does not cover reads the tree."""
    import py_compile
    import zipfile

    from taskforge.audit.audit import audit
    from taskforge.audit.env_index import EnvironmentIndex

    ws, env = _workspace(tmp_path), _env(tmp_path)
    site = env / "lib/python3.11/site-packages"
    other = ("def helper(items):\n    cleaned = [v.label.strip().lower() for v in items if v is not None]\n"
             "    return sorted(set(cleaned), key=len)\n")  # its byte code: label,strip,lower (and builtins only)
    (site / "proj_vendored").mkdir()
    (site / "proj_vendored" / "io.py").write_text("import os\n\n\n" + DELETED)
    with zipfile.ZipFile(site / "proj-1.0-py3-none-any.whl", "w") as zf:
        zf.writestr("proj/io.py", DELETED)
    src = tmp_path / "proj_other.py"
    src.write_text(other)
    py_compile.compile(str(src), cfile=str(site / "proj_other.cpython-311.pyc"), doraise=True)
    sources = {"proj.io.read_source": DELETED, "proj.other.helper": other}
    index = EnvironmentIndex.build(env, sources)
    for deleted in ({"proj.io.read_source": DELETED}, {"proj.other.helper": other}, sources):
        fps = fingerprint(deleted, [(ws / "proj" / "io.py").read_bytes()])
        assert index.covers(fps)
        full = audit(None, fps, env_dir=env)
        fast = audit(None, fps, env_dir=env, env_index=index)
        assert sorted((h.path, h.evidence) for h in fast.hits) == sorted((h.path, h.evidence) for h in full.hits)
        assert full.hits  # each has something to find: the verdicts agree on hits, not only on silence
    assert {h.path for h in audit(None, fingerprint({"proj.other.helper": other}), env_dir=env,
                                  env_index=index).hits} == {"lib/python3.11/site-packages/proj_other.cpython-311.pyc"}
    unknown = fingerprint({"proj.io.read_source": DELETED.replace("expandtabs(4)", "expandtabs(8)")})
    assert not index.covers(unknown)  # not searched for: the audit reads the environment as before
    assert audit(None, unknown, env_dir=env, env_index=index).hits


def test_a_short_names_fingerprint_needs_three_names_that_are_not_builtins() -> None:
    """configobj 5.0.9: ``_a_to_u`` (isinstance, bytes, encoding, decode) has the byte-code names of pygments'
    ``HtmlFormatter._decodeifneeded``, installed with pytest: the whole ``ConfigObj`` stub was refused
    leak_found on that one generic idiom."""
    idiom = ("def _a_to_u(self, aString):\n    if isinstance(aString, bytes) and self.encoding:\n"
             "        aString = aString.decode(self.encoding)\n    return aString\n")
    assert not [f for f in fingerprint({"configobj.ConfigObj._a_to_u": idiom}).fingerprints if f.kind == "names"]
    own = "def f(self, x):\n    return isinstance(x, bytes) and self.codec.lookup(x).name\n"
    assert [f.text for f in fingerprint({"p.f": own}).fingerprints if f.kind == "names"] == [
        "isinstance,bytes,codec,lookup,name"]
