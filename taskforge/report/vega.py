"""Vega-Lite for the report: the one pinned version, the JavaScript bundle the page inlines, static rendering.

    js = javascript_bundle()            # vega + vega-lite + vega-embed, no imports; cached on disk
    svg = to_svg(spec)                  # what the page draws, as an SVG string (tests)
    png = to_png(spec, scale=2)         # the dataset card's files

Everything runs in-process through ``vl-convert-python`` (the ``report`` extra; it embeds Deno and the
Vega libraries), with ``VEGA_LITE_VERSION`` both for the bundle and for PNG/SVG, so the page and the
card draw the same figures.

Building the bundle takes 2–3 s, more than the whole report may take, so the package ships it:
``vendor/vega-bundle-<vega-lite>.js``, made by ``python -m taskforge.report.vega --vendor`` (the build
is deterministic; provenance and licences in ``vendor/README.md``). Without that file (a trimmed
install) the bundle is built once and kept under ``<work_dir>/report-assets/`` (temp file, then
rename); where that folder cannot be written it is built in memory each time instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from taskforge.core.files import write_atomic

VEGA_LITE_VERSION = "5.21"  # the newest 5.x vl-convert 1.9 ships; must be in vl_convert.get_vegalite_versions()
SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
ASSETS_DIR = "report-assets"
_BUNDLE_MARK = "window.vegaEmbed="  # the default snippet's last statements: a complete bundle contains it
VENDOR_DIR = Path(__file__).resolve().parent / "vendor"


def vendored_bundle_path() -> Path:
    return VENDOR_DIR / f"vega-bundle-{VEGA_LITE_VERSION}.js"


def _vlc() -> Any:
    import vl_convert

    return vl_convert


def default_cache_dir() -> Path:
    """``<work_dir>/report-assets`` of the resolved settings (``TASKFORGE_WORK_DIR`` and taskforge.toml apply)."""
    from taskforge.core.settings import Settings

    return Settings.load().work_dir / ASSETS_DIR


def bundle_name() -> str:
    return f"vega-bundle-{_vlc().__version__}-{VEGA_LITE_VERSION}.js"


def _build_bundle() -> str:
    js = _vlc().javascript_bundle(vl_version=VEGA_LITE_VERSION)
    # Inlined in <script>: nothing in it may end the element or open an HTML comment there.
    return js.replace("</script", "<\\/script").replace("<!--", "<\\!--")


def _read_complete(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return text if _BUNDLE_MARK in text[-4096:] else None


def javascript_bundle(cache_dir: Path | str | None = None, *, vendored: bool = True) -> str:
    """The Vega + Vega-Lite + vega-embed bundle (sets ``window.vegaEmbed``): the vendored file, else
    the cached build, else built now (and cached).

    ``cache_dir`` defaults to ``default_cache_dir()``. A cached file that is not a complete bundle is
    rebuilt; a cache folder that cannot be written costs the build on every call, never the report.
    ``vendored=False`` skips the shipped file (tests of the cache).
    """
    if vendored and (text := _read_complete(vendored_bundle_path())) is not None:
        return text
    path = Path(cache_dir if cache_dir is not None else default_cache_dir()) / bundle_name()
    if (text := _read_complete(path)) is not None:
        return text
    text = _build_bundle()
    try:
        write_atomic(path, text)
    except OSError:
        pass  # read-only or missing work area: the page still gets the bundle built in memory
    return text


def to_svg(spec: dict[str, Any]) -> str:
    return str(_vlc().vegalite_to_svg(spec, vl_version=VEGA_LITE_VERSION))


def to_png(spec: dict[str, Any], scale: float = 2.0) -> bytes:
    return bytes(_vlc().vegalite_to_png(spec, vl_version=VEGA_LITE_VERSION, scale=scale))


def main(argv: list[str] | None = None) -> int:
    """``python -m taskforge.report.vega --vendor``: (re)write the shipped bundle from vl-convert."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--vendor", action="store_true", help=f"write {vendored_bundle_path()}")
    args = parser.parse_args(argv)
    if not args.vendor:
        parser.print_help()
        return 2
    write_atomic(vendored_bundle_path(), _build_bundle())
    print(f"{vendored_bundle_path()} (vl-convert {_vlc().__version__}, Vega-Lite {VEGA_LITE_VERSION})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
