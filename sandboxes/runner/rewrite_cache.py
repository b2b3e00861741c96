"""A content-keyed cache of pytest's assertion-rewritten test modules, for the warm fork server's runs.

Standalone (stdlib + pytest), copied next to ``warm_zygote.py``; it never imports taskforge.

Every test module pytest imports is parsed, assert-rewritten and compiled again in every run: the runs set
``PYTHONDONTWRITEBYTECODE`` (nothing is written into a workspace) and pytest's own pyc cache is keyed by the
file's path, which is a fresh temporary workspace each time. For small suites that rewriting is most of a
run (toolz: ~1 s of rewriting for a 2 s suite). ``install(cache_dir)`` wraps pytest's
``_rewrite_test(fn, config)`` so that a module whose bytes were rewritten before is loaded from
``cache_dir`` instead. The result is the code object rewriting would give:

- the key is the SHA-256 of the source bytes, the interpreter's and pytest's versions and every input the
  rewriter reads besides the source (the ``enable_assertion_pass_hook`` ini value); the file's path only
  names the code (``co_filename``, set to this run's path on every nested code object when loading);
- a rewrite that warned (``PytestAssertRewriteWarning``: the warning, or the error it becomes under
  ``-W error``, is part of the run's outcome) is never cached, so it happens, and warns, every time;
- entries are written whole (temporary file, then ``os.replace``); an entry that does not load is ignored.

For trusted runs only (the warm server's: the project's own tests, validation's own stand-ins): the cache
is shared by the server's runs and written by them. Graded runs never use it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import sys
import types
import warnings
from pathlib import Path
from typing import Any

_MAGIC = b"tf-rewrite-1"


def _refile(code: types.CodeType, filename: str) -> types.CodeType:
    consts = tuple(_refile(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _key(source: bytes, config: Any) -> str:
    import pytest

    try:
        hook = str(config.getini("enable_assertion_pass_hook")) if config is not None else "none"
    except (ValueError, KeyError):
        hook = "unknown"
    h = hashlib.sha256(_MAGIC)
    for part in (sys.version.encode(), pytest.__version__.encode(), hook.encode(), source):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def install(cache_dir: str) -> bool:
    """Wrap pytest's rewriter with the cache in ``cache_dir``; False (nothing changed) when this pytest's
    rewriter does not have the shape this module knows (then every module is rewritten as before)."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return False
    original = getattr(rewrite, "_rewrite_test", None)
    annotation = str(getattr(original, "__annotations__", {}).get("return", ""))
    if original is None or getattr(original, "_tf_cached", False) or "CodeType" not in annotation:
        return False
    stat_first = "stat" in annotation  # pytest < 9: (os.stat_result, code); pytest >= 9: (source hash, code)
    os.makedirs(cache_dir, exist_ok=True)

    def cached(fn: Path, config: Any) -> tuple[Any, types.CodeType]:
        source = Path(fn).read_bytes()
        entry = os.path.join(cache_dir, _key(source, config))
        first = os.stat(fn) if stat_first else importlib.util.source_hash(source)
        try:
            with open(entry, "rb") as fh:
                code = marshal.load(fh)
            if isinstance(code, types.CodeType):
                return first, _refile(code, str(fn))
        except (OSError, EOFError, ValueError, TypeError):
            pass
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = original(fn, config)
        for w in caught:  # as if never caught: the run's own filters decide (an error filter raises here)
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno or 0, source=w.source)
        if not caught:
            tmp = f"{entry}.{os.getpid()}.tmp"
            try:
                with open(tmp, "wb") as fh:
                    marshal.dump(result[1], fh)
                os.replace(tmp, entry)
            except OSError:
                pass
        return result

    cached._tf_cached = True  # type: ignore[attr-defined]
    rewrite._rewrite_test = cached
    return True
