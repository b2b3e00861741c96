"""The project's compiled extension modules: which to keep in an environment, and how tests find them.

An environment holds none of the project's code (tests import it from the workspace), and the workspace
is a copy of the source that is never built. So a project's C or Cython extension modules were missing
everywhere: markupsafe's ``[_speedups]`` tests and msgpack's, simplejson's and wrapt's C-path tests
skipped, pyyaml ran without libyaml, and wcwidth's conftest (it asserts the C module loaded) errored
every test. Six of the corpus's 40 packages profiled fewer passes than plain pytest for that reason.

Now the modules pip built when it installed the project are kept, outside site-packages, under
``<venv>/taskforge-ext/<package path>/``, and ``runner/ext_finder.py`` (installed as ``_taskforge_ext``
with a ``.pth``) loads one when the workspace does not provide that name: as an editable install would.

**Only modules compiled from native sources are kept** (``keep``): a ``.c``/``.cc``/``.cpp``/``.cxx``/
``.pyx`` source of the same name (or CPython's ``<name>module.c``) must be in the repository, and no ``.py`` of that name may be. A module
compiled *from* Python (mypyc, Cython on a ``.py``) is the deleted code in another form, recoverable
by importing or decompiling it: never kept. The native source itself is in the workspace anyway.

Every backend serves the same files: the local sandbox moves them out of its venv's site-packages,
the docker sandbox's resolve container sends those it built, and a Harbor export ships the local
environment's set (``bundle``).
"""

from __future__ import annotations

import os
import re
import shutil
import struct
from collections.abc import Callable, Iterable
from pathlib import Path

from taskforge.core.environment import EnvSpec
from taskforge.core.settings import Settings

EXT_DIR = "taskforge-ext"  # in the venv's root (``sys.prefix``): not importable, not on sys.path
FINDER_MODULE = "_taskforge_ext"
FINDER_SOURCE = Path(__file__).parent / "runner" / "ext_finder.py"
PTH_LINE = f"import {FINDER_MODULE}\n"
NATIVE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".pyx")
# every platform's extension suffixes (the host may differ from a container; the finder filters its own)
_EXT_SUFFIXES = (".so", ".pyd")


def is_extension(path: str) -> bool:
    return path.endswith(_EXT_SUFFIXES)


def module_stem(path: str) -> str:
    """``markupsafe/_speedups.cpython-311-x86_64-linux-gnu.so`` -> ``_speedups``."""
    return Path(path).name.split(".", 1)[0]


def _repo_files(repo_dir: Path) -> Iterable[tuple[str, str]]:
    """(directory, file name) of every file of the repository outside hidden, build and cache folders."""
    for here, dirs, files in os.walk(repo_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("build", "__pycache__"))
        for name in sorted(files):
            yield here, name


def repo_stems(repo_dir: Path) -> tuple[set[str], set[str]]:
    """(stems of native sources, stems of Python modules) in the repository (tests and hidden dirs included)."""
    native: set[str] = set()
    python: set[str] = set()
    for _here, name in _repo_files(repo_dir):
        stem, dot, suffix = name.rpartition(".")
        if not dot:
            continue
        if "." + suffix in NATIVE_SUFFIXES:
            native.add(stem)
        elif suffix == "py":
            python.add(stem)
    return native, python


# what a compiled path is built from: sources and the headers and declarations they include
_NATIVE_FILES = (*NATIVE_SUFFIXES, ".h", ".hh", ".hpp", ".pxd", ".pxi")


def native_sources(repo_dir: Path, skip: Callable[[str], bool] = lambda _p: False) -> dict[str, str]:
    """Repository-relative path -> text of every native source (C, C++, Cython and their headers) but those
    ``skip`` names and those that are not UTF-8 text (a patch could not delete them).

    A pure-Python variant's task removes them from the workspace (``taskforge.pipeline.variants``): with
    msgpack's 1.1 MB ``_cmsgpack.c`` at hand, a patch could build the compiled path again (the host's
    compiler, or an embedded binary built elsewhere) and pass the fallback's tests without writing it.
    """
    found: dict[str, str] = {}
    root = Path(repo_dir)
    for here, name in _repo_files(root):
        if not name.endswith(_NATIVE_FILES):
            continue
        rel = (Path(here) / name).relative_to(root).as_posix()
        if skip(rel):
            continue
        try:
            found[rel] = (root / rel).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return found


def keep(paths: Iterable[str], repo_dir: Path, site_dir: Path | None = None) -> list[str]:
    """The extension modules among ``paths`` that were compiled from the repository's native sources.

    With ``site_dir`` (where ``paths`` are installed), a module that links a shared library beyond the C
    runtime (pyyaml's ``_yaml`` needs ``libyaml-0.so.2``) is left out too: a docker image or a Harbor
    task would lack the library, its tests would take the pure-Python path there and the compiled one
    here, and a task validated here would grade differently there.
    """
    candidates = [p for p in paths if is_extension(p)]
    if not candidates:
        return []
    native, python = repo_stems(Path(repo_dir))
    kept = [p for p in candidates if _built_from(module_stem(p), native) and module_stem(p) not in python]
    if site_dir is not None:
        kept = [p for p in kept if not foreign_libraries(Path(site_dir) / p)]
    return sorted(kept)


def _built_from(stem: str, native: set[str]) -> bool:
    """A native source of this module's name, or CPython's ``<name>module.c`` (pyrsistent's ``pvectorc`` is
    built from ``pvectorcmodule.c``: its 102 C-path tests skipped while plain pytest ran them)."""
    return stem in native or f"{stem}module" in native or f"{stem.lstrip('_')}module" in native


# the C runtime and the interpreter: present wherever the interpreter itself runs
_RUNTIME_LIBRARIES = re.compile(r"(libc|libm|libpthread|libdl|librt|libutil|libgcc_s|ld-linux[\w.-]*|libpython3[\w.]*)"
                                r"\.so(\.\d+)*")


def needed_libraries(path: Path) -> list[str] | None:
    """The ``DT_NEEDED`` entries of a 64-bit little-endian ELF file; None when it is not one (or unreadable)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        needed: list[str] = []
        for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
            if kind != 6:  # SHT_DYNAMIC
                continue
            strtab = sections[link][4]
            for pos in range(offset, offset + size, entsize or 16):
                tag, value = struct.unpack_from("<qQ", data, pos)
                if tag == 0:
                    break
                if tag == 1:  # DT_NEEDED
                    end = data.index(b"\0", strtab + value)
                    needed.append(data[strtab + value:end].decode("utf-8", "replace"))
        return needed
    except (struct.error, IndexError, ValueError):
        return None


def foreign_libraries(path: Path) -> list[str]:
    """The shared libraries an extension module needs beyond the C runtime (unparsable: itself, i.e. kept out)."""
    needed = needed_libraries(path)
    if needed is None:
        return [path.name]
    return [n for n in needed if not _RUNTIME_LIBRARIES.fullmatch(n)]


def install_finder(site_dir: Path) -> None:
    """Put the finder and its ``.pth`` into ``site_dir`` (idempotent)."""
    site_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FINDER_SOURCE, site_dir / f"{FINDER_MODULE}.py")
    (site_dir / f"{FINDER_MODULE}.pth").write_text(PTH_LINE)


def finder_files() -> dict[str, bytes]:
    """The finder's two files, named as they go into site-packages (for images built elsewhere)."""
    return {f"{FINDER_MODULE}.py": FINDER_SOURCE.read_bytes(), f"{FINDER_MODULE}.pth": PTH_LINE.encode()}


def overlay_dir(venv: Path) -> Path:
    return Path(venv) / EXT_DIR


def move_into_overlay(site_dir: Path, rel: str, venv: Path) -> None:
    """Move one installed extension module (site-packages-relative ``rel``) into the venv's overlay."""
    dest = overlay_dir(venv) / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(site_dir / rel), dest)


def bundle(venv: Path) -> dict[str, bytes]:
    """Overlay-relative path -> bytes of every module an environment serves (empty when none)."""
    root = overlay_dir(venv)
    if not root.is_dir():
        return {}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def module_names(paths: Iterable[str]) -> list[str]:
    """Dotted module names of overlay-relative paths (for the environment's record and log)."""
    out = []
    for p in paths:
        parts = Path(p).parts
        out.append(".".join([*parts[:-1], module_stem(p)]))
    return sorted(dict.fromkeys(out))



def host_bundle(spec: EnvSpec, repo_dir: Path, settings: Settings) -> dict[str, bytes]:
    """The modules the local environment of ``spec`` serves (built on this host once, then cached).

    The docker image and a Harbor export ship these very files, so every backend runs the compiled
    path of the same binaries. Empty without native sources (nothing is built then), and for a spec
    without compiled extensions (a pure-Python variant's tasks).
    """
    if not spec.install_target or not spec.compiled_extensions or not repo_stems(Path(repo_dir))[0]:
        return {}
    from sandboxes.local import LocalSandbox  # the local sandbox imports this module

    env = LocalSandbox(settings, confined=False).prepare(spec, Path(repo_dir))
    return bundle(Path(env.location))
