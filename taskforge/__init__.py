"""taskforge: verifiable coding tasks from real repositories, by feature deletion, for RL."""

__version__ = "0.1.0"
