"""Adapters that put taskforge episodes into other people's trainers and harnesses.

* ``skyrl_env``: a SkyRL-Gym ``BaseTextEnv`` registered as ``taskforge``;
* ``verl_loop``: a verl ``AgentLoopBase`` registered as ``taskforge_agent``;
* ``mini_swe``: mini-swe-agent, unmodified, with its bash actions run inside a taskforge session.

Each imports its library lazily (the libraries are the ``agents`` extra, not the default install);
``sessions`` holds what they share: a task by instance id, a session factory, a grader.
"""
