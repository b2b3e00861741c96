"""The leak audit: scrub what the agent sees, then search all of it for the deleted code."""
