"""The imperative shell: every piece of I/O mind does (files, HTTP, processes, terminal)."""
