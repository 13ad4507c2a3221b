"""Suite-wide plugin: ``--transition-coverage`` (the full run; ``make pytest``).

With the option, every process of the run logs the edges its runtime's charts
take (``MIND_TRANSITION_LOG``, inherited by xdist workers and every ``mind``
subprocess a test starts), and at the end the controller writes one report
per chart of ``specs/statecharts`` beside the model tests' reports
(``.pytest_cache/d/transition-coverage/<Chart>-runtime.txt``) and fails the
run when the rule of ``tests/support/runtime_transitions.py`` is broken: an
edge the runtime can take (not in ``tests/model/runtime_unreachable.yaml``)
was never taken by it. Without the option (a subset of the tests) nothing is
logged and nothing is checked.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from mind.shell import transition_log
from tests.support import runtime_transitions

_OPTION = "--transition-coverage"
_DIR_KEY = pytest.StashKey[Path]()
_LINES_KEY = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        _OPTION,
        action="store_true",
        help="count the statechart edges mind's runtime takes in this run and fail if one "
        "it can take was never taken (pass it for the full suite only)",
    )


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption(_OPTION):
        return
    if not _is_worker(config):
        # Set before xdist starts its workers, so they and every subprocess inherit it.
        directory = Path(tempfile.mkdtemp(prefix="mind-transitions-"))
        os.environ[transition_log.ENV] = str(directory)
        config.stash[_DIR_KEY] = directory
    transition_log.install_from_env()  # this pytest process's own runtimes


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    directory = config.stash.get(_DIR_KEY, None)
    if directory is None:  # no option, or an xdist worker (the controller reports)
        return
    try:
        results, problems = runtime_transitions.runtime_coverage(
            runtime_transitions.read_logs(directory),
            runtime_transitions.load_unreachable(),
            runtime_transitions.spec_charts(),
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    # One summary line per chart, then each breach (the reports list every edge).
    lines = [r.report().splitlines()[0] for r in results] + problems
    cache = getattr(config, "cache", None)  # absent under -p no:cacheprovider
    if cache is not None:
        folder = cache.mkdir("transition-coverage")
        for result in results:
            name = f"{result.coverage.chart.__name__}-runtime.txt"
            (folder / name).write_text(result.report(), encoding="utf-8")
        lines.append(f"every edge: {folder}/<Chart>-runtime.txt")
    config.stash[_LINES_KEY] = lines
    if problems and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = terminalreporter.config.stash.get(_LINES_KEY, None)
    if lines is None:
        return
    terminalreporter.section("transition coverage of the runtime's machines")
    for line in lines:
        terminalreporter.write_line(line.rstrip("\n"))
