"""Where the REPL puts its status area in prompt_toolkit's prompt layout."""

from __future__ import annotations

import pytest
from prompt_toolkit import PromptSession
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.layout import ConditionalContainer, HSplit, Layout, Window
from prompt_toolkit.output import DummyOutput

from mind.errors import ConfigError
from mind.shell.repl.layout import input_column


def test_the_input_column_of_a_prompt_session_holds_its_input_window() -> None:
    with create_pipe_input() as pipe:
        session: PromptSession[str] = PromptSession(
            input=pipe, output=DummyOutput(), multiline=True
        )
        column, holder = input_column(session.layout)
    assert isinstance(holder, ConditionalContainer)
    assert holder.content is session.layout.current_window
    assert holder in column.children


def test_a_layout_without_an_input_column_is_refused_with_the_reason() -> None:
    lone = Window()
    with pytest.raises(ConfigError, match="without an input column"):
        input_column(Layout(lone))
    column = HSplit([Window(), lone])
    assert input_column(Layout(column, focused_element=lone)) == (column, lone)
