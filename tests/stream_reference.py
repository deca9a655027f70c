"""A slow, independent pure-Python model of the streaming loader's specification.

Written from the spec (docs/stream-checkpoint.md and the module docs of tokshuf_core::stream),
not from the Rust code: the differential test compares the two line for line.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def derive_key(words: list[int]) -> int:
    h = GOLDEN
    for w in words:
        h = mix64(h ^ mix64((w + GOLDEN) & M64))
    return h


def permutation(n: int, key: int) -> list[int]:
    """Balanced 6-round Feistel on the smallest even bit width >= max(2, bits(n-1)), cycle-walked."""
    bits = max(2, (n - 1).bit_length()) if n > 1 else 2
    bits += bits & 1
    half = bits // 2
    mask = (1 << half) - 1
    keys = [mix64(key ^ mix64(r + 1)) for r in range(6)]

    def enc(x: int) -> int:
        left, right = x >> half, x & mask
        for k in keys:
            left, right = right, left ^ (mix64(right ^ k) & mask)
        return (left << half) | right

    out = []
    for i in range(n):
        x = enc(i)
        while x >= n:
            x = enc(x)
        out.append(x)
    return out


def shard_docs(n: int, shards: int, s: int) -> range:
    return range(s * n // shards, (s + 1) * n // shards)


def worker_shards(shards: int, workers: int, w: int) -> range:
    return range(w * shards // workers, (w + 1) * shards // workers)


@dataclass
class Cfg:
    seed: int
    shards: int
    weights: list[int]
    line_len: int
    chunk: int
    bos: int | None = None
    eos: int | None = None
    strip: tuple[int, ...] = ()
    min_length: int = 1
    window: int = 0


def emitted(doc: list[int], cfg: Cfg) -> list[int] | None:
    """The emitted document, or None if skipped by rule."""
    d = list(doc)
    if d and d[0] in cfg.strip:
        d = d[1:]
    if d and d[-1] in cfg.strip:
        d = d[:-1]
    if not d:
        return None
    e = ([cfg.bos] if cfg.bos is not None else []) + d + ([cfg.eos] if cfg.eos is not None else [])
    return e if len(e) >= cfg.min_length else None


@dataclass
class ShardState:
    sid: int
    docs: range
    epoch: int = 0
    pos: int = 0
    offset: int = 0
    dead_run: int = 0
    perm: list[int] = field(default_factory=list)


class RefSub:
    def __init__(self, sub: int, docs: list[list[int]], cfg: Cfg, owned: range) -> None:
        self.sub, self.docs, self.cfg = sub, docs, cfg
        self.shards = [ShardState(s, shard_docs(len(docs), cfg.shards, s)) for s in owned]
        for sh in self.shards:
            sh.perm = self._perm(sh)
        self.heap: list[tuple[object, int]] = []
        for i, sh in enumerate(self.shards):
            if len(sh.docs):
                self._push(i)
        self.cur: tuple[int, int, list[int]] | None = None

    def _perm(self, sh: ShardState) -> list[int]:
        return permutation(len(sh.docs), derive_key([self.cfg.seed, self.sub, sh.sid, sh.epoch]))

    def _push(self, i: int) -> None:
        sh = self.shards[i]
        from fractions import Fraction

        heapq.heappush(self.heap, (Fraction(sh.epoch * len(sh.docs) + sh.pos, len(sh.docs)), i))

    def _advance(self, i: int) -> None:
        sh = self.shards[i]
        sh.pos += 1
        if sh.pos == len(sh.docs):
            sh.pos, sh.epoch = 0, sh.epoch + 1
            sh.perm = self._perm(sh)

    def open(self) -> bool:
        while self.cur is None:
            if not self.heap:
                return False
            _, i = heapq.heappop(self.heap)
            sh = self.shards[i]
            doc = sh.docs.start + sh.perm[sh.pos]
            e = emitted(self.docs[doc], self.cfg)
            if e is None:
                sh.dead_run += 1
                dead = sh.dead_run >= 2 * len(sh.docs)
                self._advance(i)
                if not dead:
                    self._push(i)
                continue
            sh.dead_run = 0
            self.cur = (i, doc, e)
        return True

    def next_chunk(self) -> int | None:
        if not self.open():
            return None
        i, _, e = self.cur  # type: ignore[misc]
        at = self.shards[i].offset
        return min((at // self.cfg.chunk + 1) * self.cfg.chunk, len(e)) - at

    def mid_chunk(self) -> bool:
        return self.cur is not None and self.shards[self.cur[0]].offset % self.cfg.chunk != 0

    def emit(self, room: int) -> tuple[list[int], tuple[int, int, int, int, int]]:
        i, doc, e = self.cur  # type: ignore[misc]
        sh = self.shards[i]
        start = sh.offset
        end = min((start // self.cfg.chunk + 1) * self.cfg.chunk, len(e), start + room)
        seg = (self.sub, sh.sid, sh.epoch, doc, start)
        sh.offset = end
        if end == len(e):
            sh.offset = 0
            self.cur = None
            self._advance(i)
            self._push(i)
        return e[start:end], seg


class RefWorker:
    """Lines of global worker ``w`` of ``workers`` from a fresh start."""

    def __init__(self, corpus: list[list[list[int]]], cfg: Cfg, w: int, workers: int) -> None:
        owned = worker_shards(cfg.shards, workers, w)
        self.cfg = cfg
        self.subs = [RefSub(i, docs, cfg, owned) for i, docs in enumerate(corpus)]
        self.tokens = [0] * len(corpus)
        self.buffer: list[list[int]] = []
        self.key = derive_key([cfg.seed, 0x53485546, w])
        self.counter = 0

    def _choose(self) -> int:
        nxt = [s.next_chunk() if self.cfg.weights[i] > 0 else None for i, s in enumerate(self.subs)]
        live = [i for i, c in enumerate(nxt) if c is not None]
        assert live, "no data"
        total = sum(self.tokens[i] for i in live)
        wsum = sum(self.cfg.weights[i] for i in live)
        elig = [i for i in live if self.tokens[i] * wsum <= self.cfg.weights[i] * total] or live
        from fractions import Fraction

        return min(elig, key=lambda i: (Fraction(self.tokens[i] + nxt[i], self.cfg.weights[i]), i))  # type: ignore[operator]

    def fill(self) -> list[int]:
        line: list[int] = []
        while len(line) < self.cfg.line_len:
            mid = [i for i, s in enumerate(self.subs) if s.mid_chunk()]
            i = mid[0] if mid else self._choose()
            toks, _ = self.subs[i].emit(self.cfg.line_len - len(line))
            self.tokens[i] += len(toks)
            line.extend(toks)
        return line

    def next_line(self) -> list[int]:
        if self.cfg.window == 0:
            return self.fill()
        if len(self.buffer) < self.cfg.window:
            self.buffer.append(self.fill())
        x = mix64(self.key ^ mix64(self.counter))
        self.counter += 1
        i = (x * len(self.buffer)) >> 64
        out = self.buffer[i]
        if len(self.buffer) > self.cfg.window:
            self.buffer[i] = self.buffer[-1]
            self.buffer.pop()
        else:
            self.buffer[i] = self.fill()
        return out
