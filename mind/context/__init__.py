"""What the model sees of a session: context usage and windows, compaction's view, bounded tool output.

Pure code (no I/O): the shell measures and journals, these modules decide
(docs/design/context.md).
"""
