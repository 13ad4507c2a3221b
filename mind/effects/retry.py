"""Bounded retry policy for model requests: pure arithmetic, no clocks, no sleeps.

The runtime asks :meth:`RetryPolicy.should_retry` after a failed attempt and
waits :meth:`RetryPolicy.delay_s` (it owns the clock); the frozen request is
reused unchanged (docs/design/turn.md §4).

Delays with the defaults (no ``retry-after``)::

    retry 1: 0.5 s, 2: 1.0 s, 3: 2.0 s, 4: 4.0 s   (then the failure is final)

Besides the count, the total retry time of a turn is bounded
(:meth:`RetryPolicy.within_time`, ``max_retry_seconds``): a server that
accepts and then idles until the stream idle timeout makes every attempt
long, so counting retries alone would leave ``exec`` waiting for
``(max_retries + 1) x stream_idle_timeout`` (docs/design/turn.md §4).
"""

from __future__ import annotations

from dataclasses import dataclass

from mind.errors import TRANSIENT_KINDS, FailureKind


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with a server-requested delay honoured up to a cap.

    Attributes:
        max_retries: retries after the first attempt (>= 0).
        base_delay_s: delay before retry 1, seconds (> 0).
        max_delay_s: cap of the exponential delay, seconds.
        max_retry_after_s: cap of a server ``retry-after`` delay, seconds
            (docs/design/providers.md §3).
        jitter_ratio: in [0, 1]; the exponential delay is scaled by
            ``1 - jitter_ratio * unit`` where ``unit`` is passed in by the
            caller (deterministic by default: 0.0).
        max_retry_s: total retry time of one turn, seconds: a retry is made
            only if it starts at most this long after the turn's first failed
            attempt (``max_retry_seconds`` in config.toml).
    """

    max_retries: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_retry_after_s: float = 60.0
    jitter_ratio: float = 0.0
    max_retry_s: float = 300.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.base_delay_s <= 0 or self.max_delay_s < self.base_delay_s:
            raise ValueError("need 0 < base_delay_s <= max_delay_s")
        if self.max_retry_after_s < 0:
            raise ValueError("max_retry_after_s must be >= 0")
        if not 0.0 <= self.jitter_ratio <= 1.0:
            raise ValueError("jitter_ratio must be in [0, 1]")
        if not 0.0 <= self.max_retry_s < float("inf"):
            raise ValueError("max_retry_s must be >= 0 and finite")

    def should_retry(self, attempt: int, kind: FailureKind) -> bool:
        """Whether retry number ``attempt`` may be made after a ``kind`` failure.

        Args:
            attempt: 1-based number of the retry being considered.
            kind: the failure kind of the attempt that just failed.

        Returns:
            True when ``kind`` is transient and ``attempt <= max_retries``.
        """
        return kind in TRANSIENT_KINDS and 1 <= attempt <= self.max_retries

    def within_time(self, elapsed_s: float, delay_s: float) -> bool:
        """Whether a retry waiting ``delay_s`` still starts inside the retry time.

        Args:
            elapsed_s: seconds since the turn's first failed attempt ended
                (0 at the first failure).
            delay_s: the backoff before the retry (:meth:`delay_s`).

        Returns:
            True when ``elapsed_s + delay_s <= max_retry_s``.
        """
        return elapsed_s + delay_s <= self.max_retry_s

    def delay_s(self, attempt: int, retry_after_s: float | None, *, unit: float = 0.0) -> float:
        """Seconds to wait before retry number ``attempt``.

        A server-requested delay wins when given (capped at
        ``max_retry_after_s``); otherwise ``base_delay_s * 2**(attempt-1)``
        capped at ``max_delay_s``, optionally shortened by jitter.

        Args:
            attempt: 1-based retry number (values < 1 are treated as 1).
            retry_after_s: the server's ``retry-after`` in seconds, or None.
            unit: a number in [0, 1) from the caller's random source; only
                used when ``jitter_ratio > 0``.

        Returns:
            A delay >= 0 in seconds.
        """
        if retry_after_s is not None and retry_after_s >= 0:
            return min(retry_after_s, self.max_retry_after_s)
        n = max(1, attempt)
        # exponent capped so huge attempt numbers cannot overflow
        exp = min(self.max_delay_s, self.base_delay_s * 2.0 ** min(n - 1, 64))
        unit = min(max(unit, 0.0), 1.0)
        return exp * (1.0 - self.jitter_ratio * unit)
