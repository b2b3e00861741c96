"""Files copied into environments (virtualenvs, images): the test runner and the warm fork server.

Nothing here imports taskforge: these files run with the environment's interpreter."""
