"""The CLI starts quickly: importing it pulls in no heavy library (each command imports what it needs).

`taskforge report` has a < 2 s budget for a 100-task dataset, and every command pays the CLI's import
time; pandas (via pyarrow.dataset), libcst, torch or numpy at import cost 0.2–1 s each.
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pandas", "libcst", "torch", "matplotlib", "pyarrow.dataset", "git", "numpy", "docker", "ray",
         "transformers", "vl_convert")


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def test_cli_import_loads_no_heavy_library() -> None:
    assert _loaded_after("import taskforge.cli") == []


def test_bench_commands_load_only_when_run() -> None:
    from taskforge.cli.bench_cmd import _BENCH_MODULES, load_bench_command

    for name in _BENCH_MODULES:
        command = load_bench_command(name)
        assert command is not None and command.name == name
    assert load_bench_command("no-such-bench") is None


def test_reading_a_whole_dataset_does_not_import_pandas(tmp_path) -> None:
    from taskforge.dataset import write_tasks
    from tests.strategies import sample_task

    write_tasks(tmp_path / "ds", [sample_task(i) for i in range(5)], tasks_per_shard=2)
    code = (f"from taskforge.dataset.reader import Dataset\nds = Dataset.open({str(tmp_path / 'ds')!r})\n"
            "assert len(ds.tasks()) == 5 and len(list(ds.iter_tasks())) == 5 and ds.table().num_rows == 5")
    assert "pandas" not in _loaded_after(code)


def test_error_lines_keep_square_brackets() -> None:
    """Errors are printed as text, not rich markup: `pip install 'taskforge[report]'` keeps `[report]`."""
    import typer

    from taskforge.cli._common import err_console, user_errors
    from taskforge.core.errors import ConfigError

    with err_console.capture() as captured:
        try:
            with user_errors():
                raise ConfigError("install it with pip install 'taskforge[report]' and retry")
        except typer.Exit as exc:
            assert exc.exit_code == 1
    assert "taskforge[report]" in captured.get()
