"""The one terminal sanitiser, :func:`plain`: text from a model, a tool or a
journal made safe to print (no escape sequences, no control characters).

Free of rich and prompt_toolkit, so the state code that formats listings
(:mod:`mind.shell.store`) and the tools can use it without loading a renderer
(``pyproject.toml``'s import contracts). :mod:`mind.shell.render` re-exports it.
"""

from __future__ import annotations

import re

from mind.effects.review import mark_hidden

_ANSI_RE = re.compile(
    # An OSC body never spans a newline here: an unterminated opener must not
    # swallow the lines after it (its ESC alone is dropped as a control).
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)|[@-Z\\-_])"
    # the 8-bit (C1) forms of CSI and OSC, which some terminals also obey
    r"|\x9b[0-?]*[ -/]*[@-~]|\x9d[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)"
)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain(text: str, *, keep_joiners: bool = True) -> str:
    """``text`` safe to print: terminal escape sequences and C0/C1 control
    characters removed, tabs expanded (tool or model output must not drive the
    terminal), bidi and zero-width characters shown as ``⟨U+202E⟩``
    (:func:`mind.effects.review.mark_hidden`; ``keep_joiners=False`` for
    headlines and approval summaries, where ZWJ/ZWNJ are shown too). The one
    sanitiser of the REPL and ``mind exec``'s stderr."""
    text = _CONTROL_RE.sub("", _ANSI_RE.sub("", text.replace("\r\n", "\n"))).expandtabs(4)
    return mark_hidden(text, keep_joiners=keep_joiners)
