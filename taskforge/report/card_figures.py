"""The report's dataset figures, embedded in the dataset card as PNG files (``DIR/figures/*.png``).

``taskforge.dataset.card.write_card`` calls ``embed_figures(root, card_text)`` once the card text
is rendered: the figures drawn from the dataset alone (funnel per repository, strategies, time per
stage, difficulty per tier, test sizes, lines deleted, validation timings, leak audit) are written
as PNGs and a "Figures" section linking them is inserted before the card's "Loading" section (or
appended). Training plots need a training log and stay in ``taskforge report``. The PNGs are the
page's own Vega-Lite specs rendered by vl-convert with the same Vega-Lite version (``vega.py``), so
card and page show the same figures.
"""

from __future__ import annotations

from pathlib import Path

from taskforge.core.files import write_atomic

FIGURES_DIR = "figures"
_ANCHOR = "\n## Loading"


def write_figures(root: Path | str) -> list[tuple[str, str, str]]:
    """Render the dataset figures of ``root`` into ``root/figures/``; returns (relative path, title, caption).

    PNGs of figures the data no longer supports are removed, so the folder matches the card.
    """
    from taskforge.report.data import ReportData
    from taskforge.report.figures import figure_specs
    from taskforge.report.vega import to_png

    root = Path(root)
    data = ReportData.collect(root, verify=False)
    specs = [s for s in figure_specs(data) if s.for_dataset]
    folder = root / FIGURES_DIR
    folder.mkdir(exist_ok=True)
    written = []
    for spec in specs:
        write_atomic(folder / f"{spec.key}.png", to_png(spec.spec))
        written.append((f"{FIGURES_DIR}/{spec.key}.png", spec.title, spec.caption))
    keep = {Path(p).name for p, _, _ in written}
    for stale in folder.glob("*.png"):
        if stale.name not in keep:
            stale.unlink()
    return written


def figures_markdown(figures: list[tuple[str, str, str]]) -> str:
    if not figures:
        return ""
    parts = ["## Figures\n", "Drawn from this dataset by taskforge (`taskforge report DIR` shows them with a task "
             "browser and, given a training log, the training curves).\n"]
    parts += [f"![{title}]({path})\n\n*{title}.* {caption}\n" for path, title, caption in figures]
    return "\n".join(parts)


def embed_figures(root: Path | str, card: str) -> str:
    """``card`` with a Figures section (PNG links) inserted before "## Loading"; drawn into ``root/figures/``.

    Without vl-convert (the ``report`` extra) the card is returned unchanged. A figure that cannot be
    drawn must not fail the dataset write that asked for the card: the section then says why instead.
    """
    try:
        import vl_convert  # noqa: F401
    except ImportError:
        return card
    try:
        section = figures_markdown(write_figures(root))
    except Exception as exc:  # noqa: BLE001  (the card is written after the data: never lose the run for a plot)
        section = f"## Figures\n\n_The figures could not be drawn ({type(exc).__name__}: {exc})._\n"
    if not section:
        return card
    at = card.find(_ANCHOR)
    if at < 0:
        return card.rstrip("\n") + "\n\n" + section
    return card[:at] + "\n" + section + card[at:]
