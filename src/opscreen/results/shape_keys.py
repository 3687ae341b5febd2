"""Shape keys: the printed repr of a shape detail -> the record log's compact JSON.

FlagGems records a case's inputs as ``shape_detail`` (``Benchmark.record_shapes``):
tensors become ``torch.Size``, dtypes stay dtypes, lists/tuples/dicts are walked,
anything else becomes ``None``. The record log writes it with ``json.dumps`` (a
``torch.Size`` is a tuple, so a list; a dtype goes through ``str``), the result
table prints its Python ``repr``::

    [torch.Size([64, 64]), 1, torch.float16]      (run.log)
    [[64,64],1,"torch.float16"]                   (record.log, compact)

:func:`shape_key` turns either into the same key, the compact JSON text
(``json.dumps(x, separators=(",", ":"))``). The repr parser is a small recursive
descent over tokens, never ``eval``; text it cannot read is kept verbatim as the
key (prefixed with ``"?"``) so a strange shape costs one join, not the run.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

__all__ = ["ShapeSyntaxError", "parse_repr", "parse_value_at", "shape_key", "key_of", "tokenize"]

_SEP = (",", ":")

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<size>torch\.Size\()
     |(?P<open>[\[\(\{])
     |(?P<close>[\]\)\}])
     |(?P<punct>[,:=])
     |(?P<num>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)j?)
     |(?P<neg>-(?=inf\b|nan\b))
     |(?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
     |(?P<name>[A-Za-z_][A-Za-z0-9_.]*)
     |(?P<bad>\S)
    )""",
    re.X,
)

_CLOSE_OF = {"[": "]", "(": ")", "{": "}"}
_NAMES = {"None": None, "True": True, "False": False, "inf": float("inf"), "nan": float("nan")}


class ShapeSyntaxError(ValueError):
    """The text is not a repr this module understands."""


def tokenize(text: str) -> list[tuple[str, str]]:
    toks = []
    pos, end = 0, len(text)
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:  # only trailing whitespace left
            break
        kind = m.lastgroup
        if kind == "bad":
            raise ShapeSyntaxError(f"unexpected {m.group(kind)!r} at {m.start(kind)}")
        toks.append((kind, m.group(kind)))
        pos = m.end()
    return toks


class _Parser:
    __slots__ = ("toks", "i")

    def __init__(self, toks: list[tuple[str, str]], i: int = 0):
        self.toks = toks
        self.i = i

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def next(self) -> tuple[str, str]:
        if self.i >= len(self.toks):
            raise ShapeSyntaxError("unexpected end of text")
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def expect(self, value: str) -> None:
        kind, text = self.next()
        if text != value:
            raise ShapeSyntaxError(f"expected {value!r}, got {text!r}")

    def value(self) -> Any:
        kind, text = self.next()
        if kind == "num":
            if text.endswith("j"):
                return text  # a complex scalar: keep its text
            if "." in text or "e" in text or "E" in text:
                return float(text)
            return int(text)
        if kind == "size":  # torch.Size([a, b]) -> [a, b]
            inner = self.value()
            self.expect(")")
            return list(inner) if isinstance(inner, (list, tuple)) else inner
        if kind == "open":
            return self.container(text)
        if kind == "str":
            return ast.literal_eval(text)
        if kind == "neg":
            kind2, name = self.next()
            return -_NAMES[name]
        if kind == "name":
            if text in _NAMES:
                return _NAMES[text]
            nxt = self.peek()
            if nxt is not None and nxt[1] == "(":  # some_object(...): keep the repr's text
                start = self.i - 1
                self.next()
                self.container("(")
                return "".join(t for _, t in self.toks[start : self.i])
            return text  # torch.float16 and other names: as str() gives them
        raise ShapeSyntaxError(f"unexpected {text!r}")

    def container(self, opener: str) -> Any:
        closer = _CLOSE_OF[opener]
        if opener == "{":
            out: dict = {}
            while True:
                tok = self.peek()
                if tok is None:
                    raise ShapeSyntaxError("unclosed {")
                if tok[1] == "}":
                    self.i += 1
                    return out
                k = self.value()
                self.expect(":")
                v = self.value()
                out[k if isinstance(k, str) else json.dumps(k, separators=_SEP)] = v
                tok = self.peek()
                if tok is not None and tok[1] == ",":
                    self.i += 1
        items = []
        while True:
            tok = self.peek()
            if tok is None:
                raise ShapeSyntaxError(f"unclosed {opener}")
            if tok[1] == closer:
                self.i += 1
                return items  # tuples become lists, as in JSON
            items.append(self.value())
            tok = self.peek()
            if tok is not None and tok[1] == ",":
                self.i += 1
            elif tok is None or tok[1] != closer:
                raise ShapeSyntaxError(f"expected ',' or {closer!r}")


def parse_repr(text: str) -> Any:
    """The printed repr of a shape detail -> the JSON-able object the record log holds."""
    text = text.strip()
    if text == "N/A":
        return None
    p = _Parser(tokenize(text))
    obj = p.value()
    if p.i != len(p.toks):
        raise ShapeSyntaxError(f"trailing text after the value: {text!r}")
    return obj


def parse_value_at(p_toks: list[tuple[str, str]], i: int) -> tuple[Any, int]:
    """Parse one value from a token list at index ``i``; return it and the next index."""
    p = _Parser(p_toks, i)
    obj = p.value()
    return obj, p.i


_encode = json.JSONEncoder(separators=_SEP).encode


def key_of(obj: Any) -> str:
    """The join key of a JSON-able shape detail (as the record log holds it):
    ``json.dumps(obj, separators=(",", ":"))``."""
    return _encode(obj)


_cache: dict[str, str] = {}


def shape_key(text: str) -> str:
    """Join key of a printed shape detail; unreadable text is kept as ``"?" + text``."""
    key = _cache.get(text)
    if key is None:
        try:
            key = key_of(parse_repr(text))
        except (ShapeSyntaxError, ValueError, SyntaxError, KeyError, RecursionError):
            key = "?" + " ".join(text.split())
        if len(_cache) < 200_000:
            _cache[text] = key
    return key
