"""Small standard-library-only programs mind starts beside itself.

Each is run by path (``python -I -S mind/sidecars/NAME.py``), never imported
by mind's process, and imports nothing from ``mind`` (an import-linter
contract): it must outlive mind and start fast. ``supervisor`` owns one tool
command's process tree (``docs/design/processes.md``).
"""
