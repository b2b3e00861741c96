"""``taskforge sandbox prune`` on a real engine: it removes env images no run can hit again (their base
image is gone), dangling first stages of env builds, and, when asked, old or all env images; it
keeps the rest. Images live in a test-only repository name so the host's real env images are safe."""

from __future__ import annotations

import functools
import io
import json
import tarfile

import pytest

from sandboxes.docker_images import LABEL, VENV, prune_env_images
from taskforge.audit.image_layers import forget_cached_image

pytestmark = pytest.mark.docker
REPO = "taskforge-env-prunetest"


def _build(client, dockerfile: str, tag: str | None = None, labels: dict[str, str] | None = None):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in {"Dockerfile": dockerfile.encode(), "f.txt": b"x\n"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    buf.seek(0)
    image, _ = client.images.build(fileobj=buf, custom_context=True, tag=tag, labels=labels or {}, rm=True)
    return image


def _env_label(base_id: str) -> dict[str, str]:
    return {LABEL: json.dumps({"extra": {"base_image_id": base_id}})}


def test_prune_removes_what_no_run_can_use(tmp_path) -> None:
    from tests._docker_env import require_docker

    client = require_docker()
    base = _build(client, "FROM scratch\nCOPY f.txt /base.txt\n", tag=f"{REPO}-base:1")
    live = _build(client, "FROM scratch\nCOPY f.txt /live.txt\n", tag=f"{REPO}:live", labels=_env_label(base.id))
    orphan = _build(client, "FROM scratch\nCOPY f.txt /orphan.txt\n", tag=f"{REPO}:orphan",
                    labels=_env_label("sha256:" + "0" * 64))
    stage = _build(client, f"FROM scratch\nCOPY f.txt {VENV}/stage-{tmp_path.name}.txt\n")  # untagged: dangling
    cache = tmp_path / "audit-images"  # the audit's layer cache holds the orphan's one layer
    (cache / "layers" / ("ab" * 16)).mkdir(parents=True)
    (cache / "images").mkdir()
    (cache / "images" / f"{orphan.id.removeprefix('sha256:')[:24]}.json").write_text(json.dumps(["sha256:" + "ab" * 32]))
    try:
        planned = prune_env_images(client, repository=REPO, dry_run=True, on_removed=functools.partial(forget_cached_image, cache), stage_min_age_s=0)
        reasons = {p.image_id: p.reason for p in planned}
        assert reasons.get(orphan.id) == "its base image is gone"
        assert reasons.get(stage.id) == "first stage of an env build"
        assert live.id not in reasons and not any(p.removed for p in planned)
        client.images.get(orphan.id)  # a dry run removes nothing

        done = {p.image_id: p for p in prune_env_images(client, repository=REPO, on_removed=functools.partial(forget_cached_image, cache), stage_min_age_s=0)}
        assert done[orphan.id].removed and done[stage.id].removed
        assert list((cache / "images").iterdir()) == [] and list((cache / "layers").iterdir()) == []
        assert [i.id for i in client.images.list(name=REPO)] == [live.id]

        assert prune_env_images(client, repository=REPO, older_than_days=1) == []  # live is minutes old
        everything = prune_env_images(client, repository=REPO, everything=True)
        assert [(p.image_id, p.reason, p.removed) for p in everything] == [(live.id, "all", True)]
        assert client.images.list(name=REPO) == []
    finally:
        for image in (stage, orphan, live, base):
            try:
                client.images.remove(image.id, force=True)
            except Exception:  # already pruned
                pass


def test_prune_command_dry_run_lists_and_keeps() -> None:
    from typer.testing import CliRunner

    from taskforge.cli import app
    from tests._docker_env import require_docker

    client = require_docker()
    before = sorted(i.id for i in client.images.list())
    result = CliRunner().invoke(app, ["sandbox", "prune", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["dry_run"] is True and all(not i["removed"] for i in summary["images"])
    assert sorted(i.id for i in client.images.list()) == before
