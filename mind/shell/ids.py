"""Identifier minting: time-ordered, collision-resistant, plain strings.

Session ids are UUIDv7-shaped (RFC 9562 §5.7) so a directory listing sorts by
creation time; turn, message and call ids carry a short prefix naming what
they identify.
"""

from __future__ import annotations

import os
import time
import uuid


def new_session_id() -> str:
    """A UUIDv7 string (48-bit Unix ms timestamp + 74 random bits), e.g. ``0190...-7...``."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76  # version
    value |= (rand >> 68 & 0xFFF) << 64  # rand_a, 12 bits
    value |= 0b10 << 62  # variant
    value |= rand & ((1 << 62) - 1)  # rand_b, 62 bits
    return str(uuid.UUID(int=value))


def new_id(prefix: str) -> str:
    """A prefixed random id such as ``turn_3f9a1c0b2d4e5f60`` (64 random bits)."""
    return f"{prefix}_{os.urandom(8).hex()}"
