"""Every file of every layer of a docker image, read through the docker SDK (``image.save()``).

The saved image is a tar of layer tars (``<id>/layer.tar`` in the classic format, ``blobs/sha256/*``
in the OCI one, gzip-compressed or not). Each layer is read as a stream, file by file, so an image is
never unpacked on disk and a file removed by a later layer (a whiteout) is still seen in the layer
that added it: what the agent could recover with ``docker save`` is what the audit reads.
"""

from __future__ import annotations

import io
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


def iter_image_files(image: Any, client: Any = None,
                     wants: Callable[[int], bool] = lambda size: True) -> Iterator[tuple[str, bytes]]:
    """``(layer/path, content)`` of every regular file in every layer of ``image``."""
    img = resolve_image(image, client)
    stream = io.BufferedReader(_ChunkStream(img.save(named=False)), buffer_size=1 << 20)
    with tarfile.open(fileobj=stream, mode="r|") as outer:
        for member in outer:
            if not member.isfile():
                continue
            name = member.name
            if not (name.endswith("layer.tar") or name.startswith("blobs/")):
                continue
            fileobj = outer.extractfile(member)
            if fileobj is None:
                continue
            yield from _layer_files(name, fileobj, wants)


def _layer_files(layer: str, fileobj: Any, wants: Callable[[int], bool]) -> Iterator[tuple[str, bytes]]:
    label = layer.split("/")[-2] if layer.endswith("layer.tar") else layer.rsplit("/", 1)[-1]
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
                    yield f"{label[:12]}:/{member.name.lstrip('./')}", f.read()
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


def cached_image_dir(image: Any, cache_root: Path, client: Any = None,
                     wants: Callable[[int], bool] = lambda size: True) -> Path:
    """Every layer's files of ``image`` extracted once under ``cache_root/<image id>/<layer>/...``.

    Tasks of one repository share one environment image: the first audit pays for ``image.save()``,
    the others search the extracted layers like a directory. Written to a temporary directory and
    renamed, so concurrent audits never see half an extraction.
    """
    img = resolve_image(image, client)
    target = Path(cache_root) / img.id.replace("sha256:", "")[:24]
    if target.is_dir():
        return target
    Path(cache_root).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".extract-", dir=cache_root))
    try:
        for label, data in iter_image_files(img, client, wants):
            layer, path = label.split(":/", 1)
            dest = tmp / layer / path
            if not dest.resolve().is_relative_to(tmp.resolve()):
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        try:
            os.rename(tmp, target)
        except OSError:  # another audit finished first: keep its copy
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
