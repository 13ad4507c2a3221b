"""What the model sees of a session: usage and windows, compaction, bounded tool output.

Pure code (no I/O): the shell measures and journals, these modules decide
(docs/design/context.md).
"""
