"""Every file of every layer of a docker image, read through the docker SDK (``image.save()``).

The saved image is a tar of layer tars (``<id>/layer.tar`` in the classic format, ``blobs/sha256/*``
in the OCI one, gzip-compressed or not). Each layer is read as a stream, file by file, and hashed on
the way (its diff id), so an image is never unpacked as a whole and a file removed by a later layer
(a whiteout) is still seen in the layer that added it: what the agent could recover with ``docker
save`` is what the audit reads. ``cached_image_layers`` keeps each layer's files on disk once, by diff
id, for the audits of the other tasks (and images) that share it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from taskforge.core.errors import SandboxError
from taskforge.core.files import write_atomic


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


class SavedLayer:
    """One layer of a save stream: ``files()`` yields ``(path, content)``; once it is exhausted,
    ``diff_id`` holds the layer's diff id (sha256 of its uncompressed tar, as in ``RootFS.Layers``)."""

    def __init__(self, label: str, fileobj: Any, wants: Callable[[int], bool]) -> None:
        self.label = label  # the stream's own name for it (legacy v1 id or blob digest), shortened
        self.diff_id = ""
        self._fileobj = fileobj
        self._wants = wants

    @property
    def short(self) -> str:
        """How hits name the layer: the diff id's first 12 hex digits (what ``docker inspect`` shows)."""
        return self.diff_id.removeprefix("sha256:")[:12] or self.label

    def files(self) -> Iterator[tuple[str, bytes]]:
        raw = io.BufferedReader(self._fileobj, buffer_size=1 << 20)
        source: Any = gzip.GzipFile(fileobj=raw) if raw.peek(2)[:2] == b"\x1f\x8b" else raw
        hashing = _HashingReader(source)
        try:
            with tarfile.open(fileobj=hashing, mode="r|") as inner:
                for member in inner:
                    if not member.isfile() or not self._wants(member.size):
                        continue
                    f = inner.extractfile(member)
                    if f is not None:
                        yield member.name.lstrip("./"), f.read()
        except (tarfile.TarError, OSError, EOFError):
            pass  # not a layer (a config blob) or a format we cannot read: nothing more from it
        while hashing.read(1 << 20):  # the tar's end padding: the diff id covers every byte
            pass
        self.diff_id = f"sha256:{hashing.digest.hexdigest()}"


class _HashingReader(io.RawIOBase):
    def __init__(self, source: Any) -> None:
        self._source = source
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        try:
            data = self._source.read(len(b))
        except (OSError, EOFError):
            data = b""
        n = len(data)
        b[:n] = data
        self.digest.update(data)
        return n


class SavedImage:
    """One pass over ``image.save()``, layer by layer (each layer's files must be read before the next)."""

    def __init__(self, image: Any, client: Any = None) -> None:
        self.image = resolve_image(image, client)

    def layers(self, wants: Callable[[int], bool] = lambda size: True) -> Iterator[SavedLayer]:
        stream = io.BufferedReader(_ChunkStream(self.image.save(named=False)), buffer_size=1 << 20)
        with tarfile.open(fileobj=stream, mode="r|") as outer:
            for member in outer:
                name = member.name
                if not member.isfile() or not (name.endswith("layer.tar") or name.startswith("blobs/")):
                    continue
                fileobj = outer.extractfile(member)
                if fileobj is not None:
                    yield SavedLayer(_layer_label(name), fileobj, wants)


def iter_image_files(image: Any, client: Any = None,
                     wants: Callable[[int], bool] = lambda size: True) -> Iterator[tuple[str, bytes]]:
    """``(layer:/path, content)`` of every regular file in every layer of ``image``."""
    for layer in SavedImage(image, client).layers(wants):
        for path, data in layer.files():
            yield f"{layer.label}:/{path}", data


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


def cached_image_layers(image: Any, cache_root: Path | str, client: Any = None,
                        wants: Callable[[int], bool] = lambda size: True) -> list[tuple[str, Path]]:
    """``(diff id, folder)`` of every layer of ``image``, each extracted once under ``cache_root``.

    Layers are stored by diff id (``layers/<hex>/``), so the base image's layers, shared by every
    environment image, are on disk once; ``images/<image id>.json`` lists an image's layers in order.
    The first audit of an image pays for ``image.save()``; later ones search folders. Each layer is
    extracted into a temporary folder and renamed, so concurrent audits never see half a layer.
    """
    img = resolve_image(image, client)
    root = Path(cache_root)
    index = root / "images" / f"{img.id.removeprefix('sha256:')[:24]}.json"
    try:
        listed = [str(d) for d in json.loads(index.read_text())]
    except (OSError, ValueError, TypeError):
        listed = []
    if listed and all(_layer_dir(root, d).is_dir() for d in listed):
        return [(d, _layer_dir(root, d)) for d in listed]
    (root / "layers").mkdir(parents=True, exist_ok=True)
    found = [_extract_layer(root, layer) for layer in SavedImage(img, client).layers(wants)]
    in_order = _diff_ids(img)
    order = in_order if sorted(in_order) == sorted(found) else found
    write_atomic(index, json.dumps(order))
    return [(d, _layer_dir(root, d)) for d in order]


def forget_cached_image(cache_root: Path | str, image_id: str) -> None:
    """Drop ``image_id`` from the layer cache, and every layer no other cached image lists."""
    root = Path(cache_root)
    (root / "images" / f"{image_id.removeprefix('sha256:')[:24]}.json").unlink(missing_ok=True)
    kept: set[str] = set()
    for other in (root / "images").glob("*.json"):
        try:
            kept.update(_layer_dir(root, str(d)).name for d in json.loads(other.read_text()))
        except (OSError, ValueError, TypeError):
            return  # cannot tell what is still in use: keep every layer
    for layer in (root / "layers").glob("*"):
        if layer.is_dir() and not layer.name.startswith(".") and layer.name not in kept:
            shutil.rmtree(layer, ignore_errors=True)


def _layer_dir(root: Path, diff_id: str) -> Path:
    return root / "layers" / diff_id.removeprefix("sha256:")[:32]


def _extract_layer(root: Path, layer: SavedLayer) -> str:
    tmp = Path(tempfile.mkdtemp(prefix=".extract-", dir=root / "layers"))
    try:
        for path, data in layer.files():
            dest = tmp / path
            if not dest.resolve().is_relative_to(tmp.resolve()):
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        target = _layer_dir(root, layer.diff_id)
        if target.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)  # another image (the same base) brought it already
        else:
            try:
                os.rename(tmp, target)
            except OSError:  # another audit finished it first: keep its copy
                shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return layer.diff_id
