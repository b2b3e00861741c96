"""The HTML report of a dataset and a training run (``taskforge report``), and the dataset card's figures.

    from taskforge.report.html import write_report
    write_report("datasets/out/demo", "report.html", train_log="datasets/out/demo/train/metrics.jsonl")

``data.py`` collects values from the dataset directory and the log; ``figures.py`` draws them with
matplotlib (the ``report`` extra); ``html.py`` writes one self-contained page (``assets.py``: its CSS
and script); ``card_figures.py`` writes the same dataset figures as PNGs for ``DIR/README.md``.
"""
