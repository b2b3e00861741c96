"""Profile a repository: build its environment, run the baseline, map per-test coverage."""
