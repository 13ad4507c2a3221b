"""The package version (single source)."""

__version__ = "0.1.0"
