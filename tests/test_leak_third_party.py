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
