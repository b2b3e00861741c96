"""The HTML report of a dataset and a training run (``taskforge report``), and the dataset card's figures.

    from taskforge.report.html import write_report
    write_report("datasets/out/demo", "report.html", train_log="datasets/out/demo/train/metrics.jsonl")

``data.py`` collects values from the dataset directory and the log; ``figures.py`` turns them into
Vega-Lite specs; ``vega.py`` pins the Vega-Lite version and wraps vl-convert (the ``report`` extra: the
JavaScript bundle, PNG/SVG rendering); ``html.py`` writes one self-contained page (``assets.py``: its
CSS and scripts) that draws the specs in the browser; ``card_figures.py`` writes the dataset's figures
as PNGs for ``DIR/README.md``.
"""
