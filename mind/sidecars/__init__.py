"""Small standard-library-only programs mind starts beside itself.

Each is run as its own top-level module (``python -I -S -c "import NAME"``
with this directory first on ``sys.path``, so from its cached bytecode, or
started ahead as a spare; or by path), never imported by mind's process, and imports nothing from
``mind`` (an import-linter contract): it must outlive mind and start fast.
``supervisor`` owns one tool command's process tree (``docs/design/processes.md``).
"""
