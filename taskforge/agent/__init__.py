"""Agentic episodes: a live sandbox session per episode, tools, scaffolds, trajectories and monitors."""
