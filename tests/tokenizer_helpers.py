"""Helpers for tests that build tokenizer files."""

from __future__ import annotations


def byte_chars() -> dict[int, str]:
    """GPT-2's byte → printable character table."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = {b: chr(b) for b in printable}
    n = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + n)
            n += 1
    return chars
