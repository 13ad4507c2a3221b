"""The environment a test gives a ``mind`` subprocess it starts.

Tests drop the developer's own configuration (``MIND_*``, provider keys) so
a child sees only what the test sets — but the full run's instrumentation,
``MIND_TRANSITION_LOG`` (``tests/conftest.py``), must reach every child, or
the edges its runtime takes go uncounted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from mind.shell.transition_log import ENV as TRANSITION_LOG


def without_prefixes(
    *prefixes: str, drop: tuple[str, ...] = (), environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """``environ`` minus the variables named in ``drop`` or starting with one of
    ``prefixes``; ``MIND_TRANSITION_LOG`` is always kept."""
    return {
        k: v
        for k, v in environ.items()
        if k == TRANSITION_LOG or not (k.startswith(prefixes) or k in drop)
    }
