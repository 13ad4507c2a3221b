"""A session killed (SIGKILL) while its approval card was shown: a real
child process runs an interactive library session whose scripted model asks
for one shell command under ``--approval untrusted``, prints the session and
question ids when the card is shown, and is killed there, unanswered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from tests.support.child_env import without_prefixes

CHILD = textwrap.dedent(
    """
    import sys, anyio, mind
    from pathlib import Path
    from mind.generated import events as ev

    async def main() -> None:
        config = mind.resolve_config(
            provider="scripted", script=sys.argv[2], approval="untrusted", env={}
        )
        async with mind.Runtime.open(state_root=Path(sys.argv[1]) / "state") as rt:
            s = await rt.create_session(cwd=Path(sys.argv[1]), config=config, interactive=True)
            async for event in s.submit("go"):
                if isinstance(event, ev.ApprovalRequestedEvent):
                    print(s.session_id, event.interaction_id, flush=True)
                    await anyio.sleep_forever()  # the person never answers: kill -9

    anyio.run(main)
    """
)
"""The child: argv[1] the test directory (cwd; state root ``state/``),
argv[2] the script."""

KILL_WAIT_S = 10


def killed_at_the_card(tmp_path: Path, command: str) -> tuple[str, str, Path]:
    """Run :data:`CHILD` in ``tmp_path`` with a script whose first round
    calls ``shell`` with ``command`` and whose second answers "ok"; SIGKILL
    it once the card is shown.

    Returns:
        ``(session id, interaction id, the script's path)``.
    """
    script = tmp_path / "script.yaml"
    call = {"name": "shell", "arguments": {"command": command}}
    script.write_text(yaml.safe_dump([{"tool_calls": [call]}, {"text": "ok"}]), "utf-8")
    env = without_prefixes("MIND_", "OPENAI_", "ANTHROPIC_")
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), str(script)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            session_id, interaction_id = child.stdout.readline().split()  # shown
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=KILL_WAIT_S)
    return session_id, interaction_id, script
