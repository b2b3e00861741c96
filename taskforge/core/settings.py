"""Typed run configuration, layered: defaults -> ``taskforge.toml`` -> ``TASKFORGE_*`` env -> CLI flags.

Each field carries its documentation. ``Settings.load(overrides)`` resolves the layers; the CLI logs
the resolved settings once at the start of a run.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from taskforge.core.errors import ConfigError


def _doc(text: str, default: Any = None, factory: Any = None) -> Any:
    if factory is not None:
        return field(default_factory=factory, metadata={"doc": text})
    return field(default=default, metadata={"doc": text})


@dataclass(frozen=True, slots=True)
class Settings:
    work_dir: Path = _doc("Content-addressed work area (repos, environments, sdists), reused across runs.",
                          factory=lambda: Path(os.path.expanduser("~/.cache/taskforge")))
    sandbox: str = _doc("Backend that runs tests: local (confined by bubblewrap) | docker | auto (docker when a "
                        "daemon answers) | local-unsafe (no isolation: trusted code only).", "local")
    monitor_zero: bool = _doc("Score 0 for a patch in which the patch monitor finds a hack signature (the "
                              "findings are always reported, flag 'suspicious'); rules the task's own gold "
                              "patch fires are exempt for that task.", True)
    battery: bool = _doc("At validation, grade cheap cheating stand-ins (always-equal object, None, first "
                         "argument, xfail, skip, frame oracle) and reject tasks they pass.", True)
    canary_copy_max_s: float = _doc("A test whose baseline run took longer than this many seconds gets no canary "
                                     "copy (every grading would run each copy: a block of 15 copies of decorator's "
                                     "5.8 s documentation test added ~90 s to each); without a copy it guards "
                                     "nothing, and max_forge_chance counts that.", 2.0)
    first_gold_hidden_share: float = _doc("At validation, the first gold grading also runs the PASS_TO_PASS tests of "
                                          "the hidden tests' files (where the grading harness edits) when their "
                                          "baseline time is at most this share of the suite's, or at most 2 s, or no "
                                          "grading check vouches for them (pyparsing's test_unit.py holds 1,900 of its "
                                          "2,094 tests: every gold grading ran ~the whole suite).", 0.25)
    max_forge_chance: float = _doc("At validation, reject a task when a forger that rewrites the runner's records, "
                                   "passing the tests its stand-in ran and telling look-alike copies apart by "
                                   "reading the hidden files, would pass more than this share of gradings "
                                   "(taskforge.reward.canaries.forge_chance; 1.0 keeps every task).", 1 / 8)
    max_unguarded_share: float = _doc("At validation, a task over max_forge_chance whose seals (and the deleted "
                                      "lines they run) guard all but at most this share of its FAIL_TO_PASS "
                                      "tests loses those few tests (provenance 'unguarded') instead of being "
                                      "refused: a test that leaves the reward is none a forger can take (idna "
                                      "3.20's ulabel stub: 6 error-branch tests of 6391, no literal to seal or "
                                      "copy); 0 refuses such tasks.", 0.01)
    local_memory_mb: int = _doc("Memory cap of one confined local test run (MB).", 4096)
    local_pids: int = _doc("Process cap of one confined local test run.", 1024)
    python: str = _doc("Python interpreter used to build environments (local sandbox).", "python3.11")
    jobs: int = _doc("Parallel workers for candidates and gradings (1 = synchronous).", 1)
    executor: str = _doc("Where stage functions run: process | ray.", "process")
    ray_address: str = _doc("Ray cluster address for executor=ray ('' = start a local instance).", "")
    baseline_runs: int = _doc("Full-suite runs on pristine code; inconsistent tests are flaky (the grading check "
                              "grades every reliable test once more, so 2 runs + the check observe each one 3 "
                              "times).", 2)
    baseline_more_runs_max_s: float = _doc("Runs after the first (coverage) one are skipped when it took "
                                           "longer than this many seconds: the grading check still observes "
                                           "every reliable test a second time, and validation then grades "
                                           "each gold patch as often as validation_repeats asks (0 = never "
                                           "skip). Coverage costs 4x on a pure-Python suite: more-itertools' "
                                           "40 s suite took 164 s with it.", 120.0)
    validation_repeats: int = _doc("Repeats of every validation check; any disagreement rejects.", 2)
    test_timeout_s: float = _doc("Wall-clock limit of one test-suite run, in seconds.", 900.0)
    install_timeout_s: float = _doc("Wall-clock limit of building an environment, in seconds.", 1200.0)
    base_image: str = _doc("Docker base image with Python (e.g. python:3.11-slim, or taskforge/base:bookworm).",
                           "taskforge/base:bookworm")
    ca_bundle: str = _doc("CA bundle passed to pip inside sandboxes ('' = none); for TLS-intercepting proxies.",
                          "")
    docker_memory: str = _doc("Memory limit of a test container.", "2g")
    docker_pids: int = _doc("Process limit of a test container.", 512)
    docker_cpus: float = _doc("CPU limit of a test container.", 1.0)
    seed: int = _doc("Seed of every shuffle and sample.", 0)
    agent_max_steps: int = _doc("Agentic episodes: most model turns per episode (then: step_budget).", 50)
    agent_max_tokens: int = _doc("Agentic episodes: most tokens the model may generate per episode, all turns "
                                 "together (then: token_budget).", 65536)
    agent_wall_clock_s: float = _doc("Agentic episodes: wall-clock limit of one episode, in seconds (then: "
                                     "wall_clock).", 1800.0)
    agent_call_timeout_s: float = _doc("Agentic episodes: wall-clock limit of one tool call, in seconds.", 120.0)
    agent_output_chars: int = _doc("Agentic episodes: most characters of a tool's output shown to the model "
                                   "(head and tail kept, a marker in between).", 10000)
    run_limit_factor: float = _doc("Validation and grading runs are killed after run_limit_factor x the "
                                   "baseline's slowest full-suite run + run_limit_margin_s (never above "
                                   "test_timeout_s): a deletion that makes the code loop costs minutes, not "
                                   "the flat limit.", 5.0)
    run_limit_margin_s: float = _doc("Seconds added to run_limit_factor x the baseline's suite time.", 60.0)
    feature_min_entities: int = _doc("Strategy feature: fewest top-level entities a feature deletes.", 2)
    feature_max_entities: int = _doc("Strategy feature: most top-level entities a feature deletes.", 40)
    feature_max_lines: int = _doc("Strategy feature: most source lines a feature deletes.", 2000)
    feature_max_files: int = _doc("Strategy feature: most files a feature spans.", 20)
    compose_k: int = _doc("Composition: validated deletions combined into one task.", 2)
    statement_max_undetermined: int = _doc("Reject a task whose hidden tests assert on more than this many "
                                           "values nothing visible determines (after adding them to the "
                                           "statement); -1 = never reject.", 6)
    pure_python_variant: bool = _doc("A source whose environment kept compiled extension modules and gave fewer "
                                     "tasks than asked is profiled again without them, for tasks from the "
                                     "pure-Python fallbacks they hide (taskforge.pipeline.variants).", True)
    grading_check: bool = _doc("After the baseline, grade the original once through the reward path and drop "
                               "the reliable tests that fail only there (taskforge.profile.harness_check).", True)

    @classmethod
    def load(cls, overrides: Mapping[str, Any] | None = None, config_file: Path | None = None) -> Settings:
        values: dict[str, Any] = {}
        path = config_file or Path(os.environ.get("TASKFORGE_CONFIG", "taskforge.toml"))
        if path.is_file():
            try:
                values.update(tomllib.loads(path.read_text()).get("taskforge", {}))
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"config file {path} is not valid TOML ({exc}); fix or remove it") from exc
        for f in fields(cls):
            env = os.environ.get(f"TASKFORGE_{f.name.upper()}")
            if env is not None:
                values[f.name] = env
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise ConfigError(f"unknown setting(s) {sorted(unknown)}; known: {[f.name for f in fields(cls)]}")
        return cls(**{k: _coerce(cls, k, v) for k, v in values.items()})

    def with_(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (str(v) if isinstance(v := getattr(self, f.name), Path) else v) for f in fields(self)}

    @property
    def effective_ca_bundle(self) -> str:
        """The CA bundle to pass into sandboxes: the setting, else PIP_CERT/SSL_CERT_FILE when present."""
        for candidate in (self.ca_bundle, os.environ.get("PIP_CERT", ""), os.environ.get("SSL_CERT_FILE", "")):
            if candidate and Path(candidate).is_file():
                return candidate
        return ""


def _coerce(cls: type[Settings], name: str, value: Any) -> Any:
    default = next(f for f in fields(cls) if f.name == name)
    kind = type(default.default) if default.default is not dataclasses.MISSING else Path
    try:
        if kind is Path:
            return Path(os.path.expanduser(str(value)))
        if kind is bool:
            return str(value).lower() in ("1", "true", "yes", "on")
        return kind(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"setting {name}={value!r} is not a valid {kind.__name__}") from exc
