"""Vega-Lite for the report: the one pinned version, the JavaScript bundle the page inlines, static rendering.

    js = javascript_bundle()            # vega + vega-lite + vega-embed, no imports; cached on disk
    svg = to_svg(spec)                  # what the page draws, as an SVG string (tests)
    png = to_png(spec, scale=2)         # the dataset card's files

Everything runs in-process through ``vl-convert-python`` (the ``report`` extra; it embeds Deno and the
Vega libraries), with ``VEGA_LITE_VERSION`` both for the bundle and for PNG/SVG, so the page and the
card draw the same figures. Building the bundle takes seconds, so it is kept under
``<work_dir>/report-assets/vega-bundle-<vl-convert>-<vega-lite>.js`` (written to a temp file, then
renamed); where that folder cannot be written the bundle is built in memory each time instead.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

VEGA_LITE_VERSION = "5.21"  # the newest 5.x vl-convert 1.9 ships; must be in vl_convert.get_vegalite_versions()
SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
ASSETS_DIR = "report-assets"
_BUNDLE_MARK = "window.vegaEmbed="  # the default snippet's last statements: a complete bundle contains it


def _vlc() -> Any:
    import vl_convert

    return vl_convert


def default_cache_dir() -> Path:
    """``<work_dir>/report-assets`` of the resolved settings (``TASKFORGE_WORK_DIR`` and taskforge.toml apply)."""
    from taskforge.settings import Settings

    return Settings.load().work_dir / ASSETS_DIR


def bundle_name() -> str:
    return f"vega-bundle-{_vlc().__version__}-{VEGA_LITE_VERSION}.js"


def _build_bundle() -> str:
    js = _vlc().javascript_bundle(vl_version=VEGA_LITE_VERSION)
    # Inlined in <script>: nothing in it may end the element or open an HTML comment there.
    return js.replace("</script", "<\\/script").replace("<!--", "<\\!--")


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the cache is as readable as a pip cache
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def javascript_bundle(cache_dir: Path | str | None = None) -> str:
    """The Vega + Vega-Lite + vega-embed bundle (sets ``window.vegaEmbed``), from the cache or built once.

    ``cache_dir`` defaults to ``default_cache_dir()``. A cached file that is not a complete bundle is
    rebuilt; a cache folder that cannot be written costs the build on every call, never the report.
    """
    path = Path(cache_dir if cache_dir is not None else default_cache_dir()) / bundle_name()
    try:
        text = path.read_text(encoding="utf-8")
        if _BUNDLE_MARK in text[-4096:]:
            return text
    except (OSError, UnicodeDecodeError):
        pass
    text = _build_bundle()
    try:
        _write_atomic(path, text)
    except OSError:
        pass  # read-only or missing work area: the page still gets the bundle built in memory
    return text


def to_svg(spec: dict[str, Any]) -> str:
    return str(_vlc().vegalite_to_svg(spec, vl_version=VEGA_LITE_VERSION))


def to_png(spec: dict[str, Any], scale: float = 2.0) -> bytes:
    return bytes(_vlc().vegalite_to_png(spec, vl_version=VEGA_LITE_VERSION, scale=scale))
