"""Environment images: one per repository and ``EnvSpec``, tagged ``taskforge-env:<content hash>``.

An environment image is the base image plus a virtualenv (``/opt/taskforge/venv``) holding the
repository's pinned dependencies, pytest and coverage, plus the in-sandbox runner. It holds **none of
the repository's own source**: no installed copy, no wheel, no cache. Two steps:

1. *resolve*: in a throwaway container (network on, removed afterwards) the repository is copied in
   and ``pip install --dry-run --report`` resolves ``install_target`` + ``requirements`` + the test
   tooling to exact ``name==version`` pins; the project itself is dropped from the list and only its
   ``.dist-info`` is kept (metadata only, ``RECORD`` cut down), so that ``importlib.metadata`` (version,
   entry points) answers as in an installed checkout, and as in the local sandbox.
2. *build*: a two-stage Dockerfile (``templates/env.Dockerfile``) installs the pins; the final stage
   copies only the virtualenv, so the CA bundle (``Settings.effective_ca_bundle``, for TLS-intercepting
   proxies) and pip's caches never reach the image.

The tag hashes everything the image depends on (spec, base image id, the repository's packaging files,
the runner, the template), so every task of a repository reuses one image. Build logs are written to
``<work_dir>/logs/`` and named in the ``EnvironmentBuildError`` of a failed build.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import string
import tarfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions

from sandboxes import extensions, startup_hooks
from sandboxes.install_plan import InstallAttempt, InstallStep, fallback_notes, install_steps
from sandboxes.isolation import EMPTY_IMAGE_PACKAGES_SH
from sandboxes.runner_deps import refusal_in, runner_chain, runner_dependency
from taskforge.core.environment import EnvSpec, PreparedEnv, normalise_name
from taskforge.core.errors import EnvironmentBuildError, SandboxError
from taskforge.core.settings import Settings

IMAGE_REPOSITORY = "taskforge-env"
VENV = "/opt/taskforge/venv"
RUNNER = "/opt/taskforge/runner/pytest_runner.py"  # alone in its folder (that lands on sys.path)
MOUNT = "/sandbox"  # run containers: a fresh volume here, holding workspace/ and io/
LABEL = "taskforge.env"  # image label: the PreparedEnv as JSON (a cache hit needs no container)
TEST_TOOLING = ("pytest", "coverage>=7.4")  # as the local sandbox installs them: same versions
PACKAGING_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "requirements-dev.txt",
                   "requirements-test.txt", "requirements_dev.txt", "requirements_test.txt", "tox.ini")
_HERE = Path(__file__).resolve().parent
_TEMPLATE = _HERE / "templates" / "env.Dockerfile"
_RESOLVE = _HERE / "templates" / "resolve_env.py"
_DIST_INFO = _HERE / "templates" / "install_dist_info.py"
_RUNNER_SRC = _HERE / "runner" / "pytest_runner.py"


@dataclass(frozen=True, slots=True)
class Resolution:
    """What the resolve container found: exact pins (the project excluded) and the project's metadata."""

    pins: tuple[str, ...]
    python_version: str
    project: Mapping[str, Any]  # {"name", "version"}; empty when not installable
    dist_info: bytes = b""  # tar of "dist-info/<name>-<version>.dist-info/..." (metadata only)
    requires: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # name -> Requires-Dist, project too

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], dist_info: bytes = b"") -> Resolution:
        return cls(tuple(d["pins"]), str(d["python_version"]), dict(d.get("project") or {}), dist_info,
                   {k: tuple(v) for k, v in (d.get("requires") or {}).items()})


def env_image_tag(spec: EnvSpec, repo_dir: Path, base_image_id: str) -> str:
    """``taskforge-env:<hash>`` of everything the image's content depends on."""
    h = hashlib.sha256()
    h.update(json.dumps(spec.to_dict(exclude=("notes",)), sort_keys=True).encode())
    h.update(base_image_id.encode())
    for path in (_TEMPLATE, _RESOLVE, _DIST_INFO, _RUNNER_SRC, extensions.FINDER_SOURCE, startup_hooks.ROOTS_SOURCE):
        h.update(path.read_bytes() if path.is_file() else b"-")
    h.update(EMPTY_IMAGE_PACKAGES_SH.encode())
    for name in PACKAGING_FILES:
        f = repo_dir / name
        h.update(name.encode() + b"\0" + (f.read_bytes() if f.is_file() else b"-") + b"\0")
    return f"{IMAGE_REPOSITORY}:{h.hexdigest()[:16]}"


def render_dockerfile(base_image: str) -> str:
    return string.Template(_TEMPLATE.read_text()).substitute(
        base_image=base_image, venv=VENV, runner=RUNNER, mount=MOUNT,
        empty_packages=EMPTY_IMAGE_PACKAGES_SH)


def tar_bytes(files: Mapping[str, bytes], *, uid: int = 0, mode: int = 0o644, dirs: Iterable[str] = (),
              extra_tar: bytes = b"", extra_prefix: str = "") -> bytes:
    """An in-memory tar of ``dirs`` (owned by ``uid``), ``{archive path: content}`` and the members of
    ``extra_tar`` (renamed with ``extra_prefix``)."""
    buf = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in dirs:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.uid, info.gid, info.mtime = tarfile.DIRTYPE, 0o755, uid, uid, now
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid, info.mtime = len(data), mode, uid, uid, now
            tar.addfile(info, io.BytesIO(data))
        if extra_tar:
            with tarfile.open(fileobj=io.BytesIO(extra_tar)) as src:
                for member in src.getmembers():
                    fileobj = src.extractfile(member) if member.isfile() else None
                    member.name = extra_prefix + member.name
                    tar.addfile(member, fileobj)
    return buf.getvalue()


def tar_directory(root: Path, arcname: str, *, uid: int = 0, exclude: Iterable[str] = (),
                  extra_tar: bytes = b"", read_only: Iterable[str] = ()) -> bytes:
    """An in-memory tar of a directory tree (symlinks kept as links), owned by ``uid``, followed by
    the members of ``extra_tar``.

    ``read_only`` (paths relative to ``root``): those files and directories, and everything under the
    directories, belong to root (files 0644, directories 0755), and every directory above them becomes
    root's with the sticky bit (1777): a run as ``uid`` can add files next to them but can neither
    change, replace, rename nor delete them, nor add files inside a read-only directory.
    """
    skip = set(exclude)
    frozen = tuple(f"{arcname}/{p.strip('/')}" for p in read_only)
    above = {arcname} | {"/".join(f.split("/")[:i]) for f in frozen for i in range(1, f.count("/") + 1)}

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if Path(info.name).name in skip:
            return None
        info.uid = info.gid = uid
        info.uname = info.gname = ""
        info.mode |= 0o600 if info.isfile() else (0o700 if info.isdir() else 0)
        if frozen and info.name in above and info.isdir():
            info.uid = info.gid = 0
            info.mode = 0o1777
        elif frozen and any(info.name == f or info.name.startswith(f + "/") for f in frozen):
            info.uid = info.gid = 0
            info.mode = 0o755 if info.isdir() else (info.mode & 0o111) | 0o644
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(root), arcname=arcname, recursive=True, filter=owned)
        if extra_tar:
            with tarfile.open(fileobj=io.BytesIO(extra_tar)) as src:
                for member in src.getmembers():
                    tar.addfile(member, src.extractfile(member) if member.isfile() else None)
    return buf.getvalue()


def recorded_base_image(image: Any) -> str | None:
    """The base image id an environment image records in its label (``None``: not a taskforge image)."""
    try:
        return str(json.loads((image.labels or {})[LABEL])["extra"]["base_image_id"]) or None
    except (KeyError, TypeError, ValueError):
        return None


class EnvImages:
    """Builds and caches environment images through the docker SDK."""

    def __init__(self, client: docker.DockerClient, settings: Settings) -> None:
        self.client = client
        self.settings = settings

    def ensure(self, spec: EnvSpec, repo_dir: Path) -> PreparedEnv:
        """The environment image of ``spec``: reused when its tag exists, else resolved and built."""
        base_id = self.base_image_id()
        tag = env_image_tag(spec, repo_dir, base_id)
        cached = self.cached(tag)
        if cached is not None:
            return cached
        started = time.monotonic()
        log_path = self.settings.work_dir / "logs" / f"docker-env-{tag.split(':')[1]}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("w") as log:
            resolution, spec = self._resolve_with_fallback(spec, repo_dir, log, log_path)
            chains = runner_chain(resolution.requires, python_version=resolution.python_version)
            if why := refusal_in(spec.project_name, chains):
                raise EnvironmentBuildError(why)  # before an image is built: a one-line reason, never 0 tasks
            dependency = runner_dependency(spec.project_name, chains)
            compiled = self._extensions(spec, repo_dir, log)
            prepared = PreparedEnv(
                spec=spec, backend="docker", location=tag, python_version=resolution.python_version,
                frozen=resolution.pins, install_log="", build_seconds=0.0,
                extra={"image": tag, "base_image": self.settings.base_image, "base_image_id": base_id,
                       "project": json.dumps(dict(resolution.project), sort_keys=True),
                       **({"extension_modules": ",".join(extensions.module_names(compiled))} if compiled else {}),
                       **({"runner_dependency": dependency} if dependency else {})},
            )
            self._build(tag, resolution, prepared, log, log_path, compiled)
        tail = "\n".join(log_path.read_text().splitlines()[-30:])
        return PreparedEnv.from_dict({**prepared.to_dict(), "install_log": tail,
                                      "build_seconds": round(time.monotonic() - started, 3)})

    def base_image_id(self) -> str:
        base = self.settings.base_image
        try:
            return str(self.client.images.get(base).id)
        except docker.errors.ImageNotFound:
            if base.startswith("taskforge/"):  # built here, never on a registry: no lookup
                raise SandboxError(f"base image {base!r} is not built yet; build it with `taskforge sandbox "
                                   "build-base` (or pass --build-base to generate)") from None
        try:
            return str(self.client.images.pull(base).id)
        except docker.errors.APIError as exc:
            raise SandboxError(
                f"base image {base!r} is not present and cannot be pulled ({exc.explanation or exc}); "
                "build one with `taskforge sandbox build-base` or set base_image to a reachable image"
            ) from exc

    def cached(self, tag: str) -> PreparedEnv | None:
        try:
            image = self.client.images.get(tag)
        except docker.errors.ImageNotFound:
            return None
        label = (image.labels or {}).get(LABEL)
        if not label:
            return None
        prepared = json.loads(label)
        prepared["extra"] = {**(prepared.get("extra") or {}), "image": tag}  # images labelled before "image" existed
        return PreparedEnv.from_dict(prepared)

    def _ca_files(self) -> dict[str, bytes]:
        ca = self.settings.effective_ca_bundle
        return {"ca.pem": Path(ca).read_bytes()} if ca else {"ca.pem": b""}

    def _resolve_with_fallback(self, spec: EnvSpec, repo_dir: Path, log: io.TextIOBase,
                               log_path: Path) -> tuple[Resolution, EnvSpec]:
        """Resolve the first installable step of ``sandboxes.install_plan``; failures land in the notes."""
        attempts: list[InstallAttempt] = []
        for step in install_steps(spec, TEST_TOOLING):
            try:
                resolution = self._resolve(spec, step, repo_dir, log, log_path)
            except EnvironmentBuildError as exc:
                attempts.append(InstallAttempt(step, str(exc)))
                log.write(f"# step {step.label!r} failed: {exc}\n")
                continue
            notes = fallback_notes(attempts, step)
            return resolution, (dataclasses.replace(spec, notes=(*spec.notes, *notes)) if notes else spec)
        raise EnvironmentBuildError(f"no install step of {spec.project_name} resolves: "
                                    + "; ".join(f"{a.step.label}: {a.why.split(' (full log:')[0][:240]}" for a in attempts)
                                    + f" (full log: {log_path})")

    def _resolve(self, spec: EnvSpec, step: InstallStep, repo_dir: Path, log: io.TextIOBase,
                 log_path: Path) -> Resolution:
        request = {"install_target": step.install_target, "requirements": list(step.requirements),
                   "project_name": spec.project_name}
        files = {"tf/request.json": json.dumps(request).encode(), "tf/resolve_env.py": _RESOLVE.read_bytes(),
                 **{f"tf/{k}": v for k, v in self._ca_files().items()}}
        log.write(f"# resolve {json.dumps(request)} in {self.settings.base_image}\n")
        container = self.client.containers.create(
            self.settings.base_image,
            ["sh", "-c", 'exec "$(command -v /usr/local/bin/python3 || command -v /usr/bin/python3)" '
                         "/tf/resolve_env.py /tf/request.json /tf/out.json"],
            working_dir="/tf/src", labels={"taskforge.role": "resolve"}, environment=_proxy_env(),
        )
        try:
            container.put_archive("/", tar_bytes(files))
            container.put_archive("/tf", tar_directory(repo_dir, "src", exclude=(".git",)))
            container.start()
            try:
                status = container.wait(timeout=self.settings.install_timeout_s)
            except requests.exceptions.RequestException:
                container.kill()
                raise EnvironmentBuildError(
                    f"resolving the dependencies of {spec.project_name} ran past "
                    f"{self.settings.install_timeout_s:.0f}s (install_timeout_s); log: {log_path}") from None
            output = container.logs().decode(errors="replace")
            log.write(output)
            log.flush()
            if status.get("StatusCode") != 0:
                tail = " | ".join(output.strip().splitlines()[-4:])
                raise EnvironmentBuildError(
                    f"pip could not resolve {step.install_target or '(no install target)'} + "
                    f"{len(step.requirements)} requirement(s) of {spec.project_name} in "
                    f"{self.settings.base_image}: {tail} (full log: {log_path})")
            stream, _ = container.get_archive("/tf/out/dist-info")
            found = json.loads(read_file(container, "/tf/out.json"))
            dist_info = b"".join(stream)
            if why := (found.get("project") or {}).pop("install_failed", ""):
                log.write(f"# {why}: taking its metadata from the host's build\n")
                dist_info = self._host_dist_info(spec, repo_dir, why, log_path)
            return Resolution.from_dict(found, dist_info)
        finally:
            container.remove(force=True, v=True)

    def _host_dist_info(self, spec: EnvSpec, repo_dir: Path, why: str, log_path: Path) -> bytes:
        """The project's metadata-only ``.dist-info`` from the local environment of ``spec``, as a tar."""
        from sandboxes.local import LocalSandbox

        try:
            venv = Path(LocalSandbox(self.settings, confined=False).prepare(spec, repo_dir).location)
        except (EnvironmentBuildError, SandboxError) as exc:
            raise EnvironmentBuildError(f"{why}, and the host could not build it either: {exc} "
                                        f"(full log: {log_path})") from None
        project = normalise_name(spec.project_name)
        for dist in sorted(venv.glob("lib/python*/site-packages/*.dist-info")):
            if normalise_name(dist.name[: -len(".dist-info")].rsplit("-", 1)[0]) == project:
                return tar_directory(dist, f"dist-info/{dist.name}")
        raise EnvironmentBuildError(f"{why}, and the host's build has no metadata of {spec.project_name} "
                                    f"(full log: {log_path})")

    def _extensions(self, spec: EnvSpec, repo_dir: Path, log: io.TextIOBase) -> dict[str, bytes]:
        """The compiled extension modules of the local environment of ``spec`` (the same binaries)."""
        try:
            compiled = extensions.host_bundle(spec, repo_dir, self.settings)
        except (EnvironmentBuildError, SandboxError, OSError) as exc:
            log.write(f"# no compiled extension modules: the local build failed: {exc}\n")
            return {}
        if compiled:
            log.write(f"# compiled extension modules: {', '.join(extensions.module_names(compiled))}\n")
        return compiled

    def _build(self, tag: str, resolution: Resolution, prepared: PreparedEnv, log: io.TextIOBase,
               log_path: Path, compiled: Mapping[str, bytes] | None = None) -> None:
        if not _RUNNER_SRC.is_file():
            raise SandboxError(f"the in-sandbox runner {_RUNNER_SRC} is missing; reinstall taskforge")
        context = tar_bytes({
            "Dockerfile": render_dockerfile(self.settings.base_image).encode(),
            "pytest_runner.py": _RUNNER_SRC.read_bytes(),
            "build/requirements.txt": "".join(f"{p}\n" for p in resolution.pins).encode(),
            "build/install_dist_info.py": _DIST_INFO.read_bytes(),
            **{f"build/{k}": v for k, v in self._ca_files().items()},
            **{f"build/ext/{k}": v for k, v in (compiled or {}).items()},
            **({f"build/finder/{k}": v for k, v in extensions.finder_files().items()} if compiled else {}),
            **{f"build/startup/{k}": v for k, v in startup_hooks.files().items()},
        }, extra_tar=resolution.dist_info, extra_prefix="build/")
        log.write(f"# build {tag} ({len(resolution.pins)} pins)\n")
        error = ""
        deadline = time.monotonic() + self.settings.install_timeout_s
        try:
            for chunk in self.client.api.build(
                fileobj=io.BytesIO(context), custom_context=True, tag=tag, rm=True, forcerm=True, pull=False,
                decode=True, labels={LABEL: json.dumps(prepared.to_dict(), sort_keys=True)},
                buildargs=_proxy_env(), timeout=int(self.settings.install_timeout_s),
            ):
                if "stream" in chunk:
                    log.write(chunk["stream"])
                if "error" in chunk:
                    error = str(chunk["error"]).strip()
                    log.write(f"ERROR: {error}\n")
                if time.monotonic() > deadline:
                    error = f"build ran past {self.settings.install_timeout_s:.0f}s (install_timeout_s)"
                    break
        except (docker.errors.APIError, docker.errors.BuildError, requests.exceptions.RequestException) as exc:
            error = f"{type(exc).__name__}: {exc}"
        log.flush()
        if error:
            log.write(f"ERROR: {error}\n")
            raise EnvironmentBuildError(
                f"building environment image {tag} for {prepared.spec.project_name} failed: "
                f"{error.splitlines()[-1][:300]} (full log: {log_path})")


def read_file(container: Any, path: str) -> bytes:
    """One regular file out of a (possibly stopped) container, through ``get_archive``."""
    stream, _ = container.get_archive(path)
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.next()
        if member is None or not member.isfile():
            raise FileNotFoundError(path)
        extracted = tar.extractfile(member)
        assert extracted is not None
        return extracted.read()


def _proxy_env() -> dict[str, str]:
    """The host's proxy settings, for the containers and builds that reach the package index."""
    keys = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
            "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_DEFAULT_TIMEOUT")
    return {k: v for k in keys if (v := os.environ.get(k)) and "file://" not in v}


@dataclass(frozen=True, slots=True)
class PrunedImage:
    image_id: str
    tags: tuple[str, ...]
    size_mb: int
    reason: str
    removed: bool = False
    error: str = ""


def prune_env_images(client: docker.DockerClient, *, older_than_days: float | None = None,
                     everything: bool = False, dry_run: bool = False,
                     repository: str = IMAGE_REPOSITORY, on_removed: Callable[[str], None] | None = None,
                     stage_min_age_s: float = 600.0) -> list[PrunedImage]:
    """Remove environment images that no run can use again, and what their builds left behind.

    Always: images whose recorded base image is gone (the tag hashes the base id, so a new base
    never hits them) and the dangling first stages of env builds (they hold the CA bundle and pip's
    downloads) once ``stage_min_age_s`` old (a build in progress still needs its first stage).
    ``older_than_days``: also images created longer ago. ``everything``: every env image.
    Images of a running container are kept (the engine refuses; reported as ``error``).
    ``on_removed(image_id)`` is called for every removed image (the CLI drops its audit layer cache).
    """
    now = time.time()
    present = {i.id for i in client.images.list()}
    chosen: list[tuple[Any, str]] = []
    for image in client.images.list(name=repository):
        base = recorded_base_image(image)
        if everything:
            chosen.append((image, "all"))
        elif base is not None and base not in present:
            chosen.append((image, "its base image is gone"))
        elif older_than_days is not None and now - _created(image) > older_than_days * 86400:
            chosen.append((image, f"older than {older_than_days:g} days"))
    for image in client.images.list(filters={"dangling": True}):
        if (not image.tags and now - _created(image) >= stage_min_age_s
                and any(VENV in (h.get("CreatedBy") or "") for h in image.history())):
            chosen.append((image, "first stage of an env build"))
    out = []
    for image, reason in chosen:
        entry = PrunedImage(image.id, tuple(image.tags), round(image.attrs.get("Size", 0) / 1e6), reason)
        if not dry_run:
            try:
                client.images.remove(image.id, force=len(image.tags) > 1)
                entry = dataclasses.replace(entry, removed=True)
            except docker.errors.ImageNotFound:  # gone already (an untagged parent goes with its child)
                entry = dataclasses.replace(entry, removed=True)
            except docker.errors.APIError as exc:
                entry = dataclasses.replace(entry, error=str(exc.explanation or exc)[:200])
            if entry.removed and on_removed is not None:
                on_removed(image.id)
        out.append(entry)
    return out


def _created(image: Any) -> float:
    stamp = str(image.attrs.get("Created", ""))[:19]
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return time.time()  # unknown age: never "old"
