"""Write each positive attack's patch for each task as a file (patches/<attack>-<task index>.diff), for
``taskforge reward DATASET INSTANCE --patch FILE`` (default settings: the monitor on)."""
import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from harness import broken_files  # noqa: E402
from taskforge.dataset.reader import Dataset  # noqa: E402

ds = Dataset.open(Path(sys.argv[1]))
for i, task in enumerate(ds.tasks()):
    files = broken_files(ds, task)
    for name in ("weakseal_forge", "lying_tuple_forge", "sign_only_forge", "test_globals_shadow"):
        patch = importlib.import_module(f"attack_{name}").make(task, files)
        if patch:
            (HERE / "patches" / f"{name}-{i}.diff").write_text(patch)
            print(i, task.instance_id, name, len(patch))
