"""Every file of every layer of a docker image, read through the docker SDK (``image.save()``).

The saved image is a tar of layer tars (``<id>/layer.tar`` in the classic format, ``blobs/sha256/*``
in the OCI one, gzip-compressed or not). Each layer is read as a stream, file by file, so an image is
never unpacked on disk and a file removed by a later layer (a whiteout) is still seen in the layer
that added it: what the agent could recover with ``docker save`` is what the audit reads.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from taskforge.errors import SandboxError


class _ChunkStream(io.RawIOBase):
    """A readable file over an iterator of byte chunks (what ``image.save()`` returns)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def resolve_image(image: Any, client: Any = None) -> Any:
    """An ``Image`` from a tag/id (via ``client`` or ``docker.from_env()``); objects pass through."""
    if not isinstance(image, str):
        return image
    try:
        import docker

        client = client or docker.from_env()
        return client.images.get(image)
    except Exception as exc:  # docker raises DockerException / APIError / ImageNotFound / requests errors
        raise SandboxError(f"cannot read image {image!r} through the docker SDK ({exc}); start the Docker "
                           "engine or audit with --sandbox local") from exc


class SavedImage:
    """One pass over ``image.save()``: ``files()`` yields every layer's files; once it is exhausted,
    ``diff_ids`` maps each layer label (as in the yielded paths) to the layer's diff id.

    The save stream names layers by a legacy v1 id (classic format) or a blob digest (OCI), and its
    ``manifest.json``, which orders them, comes last: the mapping to ``RootFS.Layers`` is known only at
    the end of the stream.
    """

    def __init__(self, image: Any, client: Any = None) -> None:
        self.image = resolve_image(image, client)
        self.diff_ids: dict[str, str] = {}

    def files(self, wants: Callable[[int], bool] = lambda size: True) -> Iterator[tuple[str, bytes]]:
        stream = io.BufferedReader(_ChunkStream(self.image.save(named=False)), buffer_size=1 << 20)
        with tarfile.open(fileobj=stream, mode="r|") as outer:
            for member in outer:
                if not member.isfile():
                    continue
                name = member.name
                fileobj = outer.extractfile(member)
                if fileobj is None:
                    continue
                if name == "manifest.json":
                    self._read_manifest(fileobj.read())
                elif name.endswith("layer.tar") or name.startswith("blobs/"):
                    yield from _layer_files(_layer_label(name), fileobj, wants)

    def _read_manifest(self, data: bytes) -> None:
        try:
            layers = json.loads(data)[0]["Layers"]
        except (ValueError, LookupError, TypeError):
            return
        diff_ids = _diff_ids(self.image)
        if len(layers) == len(diff_ids):
            self.diff_ids = {_layer_label(name): d for name, d in zip(layers, diff_ids, strict=True)}


def iter_image_files(image: Any, client: Any = None,
                     wants: Callable[[int], bool] = lambda size: True) -> Iterator[tuple[str, bytes]]:
    """``(layer/path, content)`` of every regular file in every layer of ``image``."""
    yield from SavedImage(image, client).files(wants)


def base_layer_ids(image: Any, base_image: Any, client: Any = None) -> frozenset[str]:
    """Diff ids of ``image``'s layers that come from ``base_image`` (the image it was built ``FROM``).

    Empty when ``base_image`` is None, cannot be read, or is not the image's base (its layers are
    not a prefix of the image's): then every layer is searched.
    """
    if not base_image:
        return frozenset()
    img = resolve_image(image, client)
    try:
        base = resolve_image(base_image, client)
    except SandboxError:
        return frozenset()
    ours, theirs = _diff_ids(img), _diff_ids(base)
    return frozenset(theirs) if theirs and ours[:len(theirs)] == theirs else frozenset()


def _diff_ids(image: Any) -> list[str]:
    return list(((getattr(image, "attrs", None) or {}).get("RootFS") or {}).get("Layers") or [])


def _layer_label(name: str) -> str:
    """The short label of a layer member of a save stream (``<v1 id>/layer.tar`` or ``blobs/sha256/<hex>``)."""
    return (name.split("/")[-2] if name.endswith("layer.tar") else name.rsplit("/", 1)[-1])[:12]


def _layer_files(label: str, fileobj: Any, wants: Callable[[int], bool]) -> Iterator[tuple[str, bytes]]:
    try:
        inner = tarfile.open(fileobj=fileobj, mode="r|*")
    except tarfile.TarError:
        return  # an image config or manifest blob, not a layer
    with inner:
        try:
            for member in inner:
                if not member.isfile() or not wants(member.size):
                    continue
                f = inner.extractfile(member)
                if f is not None:
                    yield f"{label}:/{member.name.lstrip('./')}", f.read()
        except tarfile.TarError:
            return


def iter_final_files(image: Any, client: Any = None,
                     read: Callable[[str], bool] = lambda path: False) -> Iterator[tuple[str, bytes | None]]:
    """``(absolute path, content or None)`` of every regular file of the image's final filesystem.

    Read from ``container.export()`` of a created (never started) container, removed afterwards;
    content is read only for paths where ``read(path)`` is true (metadata, ``RECORD``, ``.pth``).
    """
    img = resolve_image(image, client)
    if client is None:
        import docker

        client = docker.from_env()
    container = client.containers.create(img.id, command=["true"], network_disabled=True)
    try:
        stream = io.BufferedReader(_ChunkStream(container.export()), buffer_size=1 << 20)
        with tarfile.open(fileobj=stream, mode="r|") as tf:
            for m in tf:
                if not m.isfile():
                    continue
                path = "/" + m.name.lstrip("./")
                f = tf.extractfile(m) if read(path) else None
                yield path, (f.read() if f is not None else None)
    finally:
        container.remove(force=True)


LAYERS_FILE = "layers.json"  # in an extracted image: {layer label: diff id}


def cached_image_dir(image: Any, cache_root: Path, client: Any = None,
                     wants: Callable[[int], bool] = lambda size: True) -> Path:
    """Every layer's files of ``image`` extracted once under ``cache_root/<image id>/<layer>/...``.

    Tasks of one repository share one environment image: the first audit pays for ``image.save()``,
    the others search the extracted layers like a directory. ``layers.json`` beside the layer
    folders maps each to its diff id. Written to a temporary directory and renamed, so concurrent
    audits never see half an extraction.
    """
    img = resolve_image(image, client)
    target = Path(cache_root) / img.id.replace("sha256:", "")[:24]
    if (target / LAYERS_FILE).is_file():
        return target
    Path(cache_root).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".extract-", dir=cache_root))
    try:
        saved = SavedImage(img, client)
        for label, data in saved.files(wants):
            layer, path = label.split(":/", 1)
            dest = tmp / layer / path
            if not dest.resolve().is_relative_to(tmp.resolve()):
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        (tmp / LAYERS_FILE).write_text(json.dumps(saved.diff_ids, sort_keys=True))
        if target.is_dir() and not (target / LAYERS_FILE).is_file():
            shutil.rmtree(target, ignore_errors=True)  # extracted by an older taskforge, without layers.json
        try:
            os.rename(tmp, target)
        except OSError:  # another audit finished first: keep its copy
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def cached_layer_ids(extracted: Path) -> dict[str, str]:
    """``{layer label: diff id}`` of an image extracted by ``cached_image_dir``."""
    try:
        return dict(json.loads((Path(extracted) / LAYERS_FILE).read_text()))
    except (OSError, ValueError):
        return {}
