"""Highlighting the lines of a code fence while it is still open.

A fence streamed line by line (:mod:`mind.shell.stream_blocks`) is printed a
few lines at a time, so each piece must cost its own length only: the lines
are lexed by pygments (the lexer rich's ``Syntax`` uses) and painted with the
SGR codes of the same theme, one cached code pair per token type, without
going through a rich layout per line. Lines are indented by one column, as
rich pads a whole fenced block; lines wider than the terminal are wrapped by
the terminal.

Each piece is lexed on its own, so a construct spanning two pieces (a
triple-quoted string, a block comment) may be coloured as if it started at
the second piece; the text itself is always exact.
"""

from __future__ import annotations

from functools import lru_cache
from typing import final

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import _TokenType
from pygments.util import ClassNotFound
from rich.color import ColorSystem
from rich.console import COLOR_SYSTEMS
from rich.syntax import Syntax, SyntaxTheme

CODE_THEME = "ansi_dark"
"""The syntax theme of code blocks, whole (rich markdown) or streamed (here)."""


@lru_cache(maxsize=32)
def _lexer(lang: str) -> Lexer | None:
    """The pygments lexer for a fence's info word (None: unknown or empty).

    Leading and trailing newlines are kept: a piece may be a blank line.
    """
    if not lang:
        return None
    try:
        return get_lexer_by_name(lang, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


@final
class CodeLines:
    """Paints complete lines of one open code fence for a terminal.

    Args:
        lang: the fence's info word (``python``, ``sh``...; "" or unknown:
            the lines are shown unhighlighted).
        color_system: the console's colour system name (``standard``,
            ``256``, ``truecolor``, ``windows``; None: no colour).
    """

    def __init__(self, lang: str, color_system: str | None) -> None:
        self.lang = lang
        self._lexer = _lexer(lang)
        self._system: ColorSystem | None = COLOR_SYSTEMS.get(color_system or "")
        self._theme: SyntaxTheme = Syntax.get_theme(CODE_THEME)
        self._codes: dict[_TokenType, tuple[str, str]] = {}

    def paint(self, lines: str) -> str:
        """``lines`` (already made safe to print, each ending in ``\\n`` except
        perhaps the last) as terminal text: one column of indent per line,
        SGR-coloured tokens, every line ending in ``\\n``."""
        text = lines.removesuffix("\n")
        if self._lexer is None or self._system is None:
            return "".join(" " + line + "\n" for line in text.split("\n"))
        out = [" "]
        for ttype, value in self._lexer.get_tokens(text):
            start, end = self._sgr(ttype)
            for i, part in enumerate(value.split("\n")):
                if i:
                    out.append("\n ")
                if part:
                    out.append(start + part + end)
        out.append("\n")
        return "".join(out)

    def _sgr(self, ttype: _TokenType) -> tuple[str, str]:
        """The escape codes before and after a token of ``ttype`` ("" when unstyled)."""
        codes = self._codes.get(ttype)
        if codes is None:
            style = self._theme.get_style_for_token(ttype)
            marked = style.render("\0", color_system=self._system)
            start, _, end = marked.partition("\0")
            codes = self._codes[ttype] = (start, end)
        return codes


__all__ = ["CODE_THEME", "CodeLines"]
