"""The imperative shell: every piece of I/O mind does (files, HTTP, processes, terminal)."""

import os as _os

if _os.environ.get("MIND_TRANSITION_LOG"):  # test instrumentation; see transition_log
    from mind.shell.transition_log import install_from_env as _install

    _install()
