"""mind — a terminal coding agent and Python library whose sessions cannot be lost."""

__version__ = "0.1.0"
