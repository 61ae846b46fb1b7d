"""A response body's Content-Encoding layers (``gzip``, ``deflate``; ``identity``), decoded as
its raw bytes arrive, in bounded steps: no layer may produce more than the limit, and no step
produces more than STEP bytes, so a body of nested bombs (``Content-Encoding: gzip, gzip``, a few
hundred KB on the wire) stops at the limit without ever holding more (README "HTTP").

httpx's own decoders inflate a whole chunk in one call (a 64 KB chunk of a double gzip is
gigabytes): zlib's ``max_length`` is what bounds a step, so the layers are decoded here.
"""

from __future__ import annotations

import zlib

STEP = 64 * 1024  # the most one decompression step produces
MAX_LAYERS = 5  # as curl: more layers than this is not a body but an attack
DECODED = ("gzip", "deflate")  # what evalkit asks for (Accept-Encoding) and decodes


class TooLarge(Exception):
    """A layer (or the raw body) passed the limit."""


class Undecodable(Exception):
    """The body is not what its Content-Encoding says, or uses an encoding evalkit does not decode."""


class _Layer:
    """One encoding's zlib stream; gzip may be several members back to back (RFC 1952)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.produced = 0
        self._first = True
        self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 16 if name == "gzip" else zlib.MAX_WBITS)

    def step(self, data: bytes) -> tuple[bytes, bytes]:
        """At most STEP bytes of output and the input left for the next step."""
        try:
            out = self._zlib.decompress(data, STEP)
        except zlib.error as exc:
            if not (self._first and self.name == "deflate"):
                raise Undecodable(f"{self.name}: {exc}") from None
            # "deflate" is also sent raw, without the zlib wrapper (as httpx accepts it)
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._zlib.decompress(data, STEP)
        self._first = False
        left = self._zlib.unconsumed_tail
        if self._zlib.eof and self.name == "gzip" and self._zlib.unused_data:
            left = self._zlib.unused_data  # the next member
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 16)
        return out, left


class BoundedDecoder:
    """Feed it the raw body chunk by chunk; ``body()`` is the decoded whole. ``TooLarge`` as soon
    as the raw bytes or any layer's output pass ``limit``; ``Undecodable`` for a corrupt layer or
    an encoding other than gzip, deflate or identity."""

    def __init__(self, content_encoding: str, limit: int) -> None:
        names = [n.strip().lower() for n in content_encoding.split(",") if n.strip()]
        names = [n for n in names if n != "identity"]
        if len(names) > MAX_LAYERS:
            raise Undecodable(f"{len(names)} Content-Encoding layers (at most {MAX_LAYERS})")
        unknown = [n for n in names if n not in DECODED]
        if unknown:
            raise Undecodable(f"Content-Encoding {unknown[0]!r} (evalkit decodes {', '.join(DECODED)})")
        self._layers = [_Layer(n) for n in reversed(names)]  # the last applied is undone first
        self._limit = limit
        self._raw = 0
        self._out = bytearray()

    def feed(self, raw: bytes) -> None:
        self._raw += len(raw)
        if self._raw > self._limit:
            raise TooLarge
        self._push(0, raw)

    def body(self) -> bytes:
        return bytes(self._out)

    def _push(self, index: int, data: bytes) -> None:
        if index == len(self._layers):
            if len(self._out) + len(data) > self._limit:
                raise TooLarge
            self._out += data
            return
        layer = self._layers[index]
        while True:
            out, data = layer.step(data)
            layer.produced += len(out)
            if layer.produced > self._limit:
                raise TooLarge
            if out:
                self._push(index + 1, out)
            if not data and len(out) < STEP:
                return
