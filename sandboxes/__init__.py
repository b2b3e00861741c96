"""Execution backends behind the ``Sandbox`` protocol (see ``sandboxes.protocol``)."""
