"""How long ago something happened, for people (session lists, the inbox)."""

from __future__ import annotations

import time

__all__ = ["format_age"]


def format_age(then_ms: int, now_ms: int) -> str:
    """How long ago ``then_ms`` was, for people: "just now", "3 min ago", "2 h ago".

    Args:
        then_ms: a past time, Unix epoch milliseconds (0: unknown).
        now_ms: the current time, Unix epoch milliseconds.

    Returns:
        "just now" (< 1 min), "N min ago", "N h ago", "N days ago" (< 30
        days), else the local date ``YYYY-MM-DD``; "unknown" for 0.
    """
    if then_ms <= 0:
        return "unknown"
    seconds = max(0, now_ms - then_ms) // 1000
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86_400:
        return f"{seconds // 3600} h ago"
    days = seconds // 86_400
    if days < 30:
        return "1 day ago" if days == 1 else f"{days} days ago"
    return time.strftime("%Y-%m-%d", time.localtime(then_ms / 1000))
