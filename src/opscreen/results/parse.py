"""Parse what a benchmark run leaves: run.log result tables and record logs.

Three inputs, one row type (:class:`CaseRow`):

- ``run.log`` (or any captured pytest output): FlagGems' printed tables and
  opscreen's own variant (docs/contracts.md, "Result tables in run.log"). Rows are
  not aligned with the header, so a row is split on whitespace and its tokens are
  given to the header's columns by name; TFLOPS and GBPS are optional (and FlagGems
  omits a row's TFLOPS when it is zero, so the numeric block is matched by count).
  pytest noise, tracebacks and harness banners around the tables are skipped; a log
  cut short by a kill gives the rows it has and ``truncated=True``. The harness's
  end banner (``[opscreen] result STATUS (exit N, child RC)``) tells a cut from a
  child that ended on its own before any table (pytest missing, a usage error, a
  device-fatal exit): that log is complete, not truncated.
- ``record.log``: FlagGems' ``--record log`` lines ``[INFO] {json}``, with opscreen's
  extra fields (``timer_base``, ``samples``, ``rsd``, ...) when present.
- the ``--record json`` file (``{op: {details: [...], result, test_case, reason}}``).

A row's key is ``(op, test, dtype, shape)``: ``op`` is the operator name the
benchmark printed (``op_name``), ``test`` is ``""`` or ``"#n"`` for the n-th repeat
of the same (op, dtype, shape) in one file (a shape listed twice, or a second test
function with the same op name), ``dtype`` drops the ``torch.`` prefix, and
``shape`` is the compact-JSON shape key of :mod:`opscreen.results.shape_keys`. The
same case in run.log and record.log gets the same key.

Nothing here imports torch; parsing never raises on bad input.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

from .shape_keys import ShapeSyntaxError, key_of, parse_value_at, shape_key, tokenize

__all__ = [
    "CaseRow",
    "Failure",
    "ParsedLog",
    "parse_run_log",
    "parse_run_log_text",
    "parse_record_log",
    "parse_record_log_text",
    "record_entries",
    "parse_record_json",
    "parse_file",
    "merge_rows",
    "norm_dtype",
]

STATUS_WORDS = ("SUCCESS", "FAILED")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_TITLE = re.compile(
    r"^Operator:\s*(?P<op>\S+)\s+Performance Test\s*\((?P<args>[^)]*)\)"
)
_NUM = re.compile(r"^(?:N/A|[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan)$")
_SESSION_END = re.compile(
    r"^=*\s*(?:(?:\d+ (?:passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?|rerun)"
    r"(?:, |\s))+.*\bin \d+(?:\.\d+)?s\b|no tests ran\b)"
)
_SECTION = re.compile(r"^_{3,} (?P<name>\S.*?) _{3,}\s*$")
# run_op's last line: banner_end in opscreen.op.run
_END_BANNER = re.compile(r"^\[opscreen\] result (?P<status>\w+) \(exit (?P<exit>-?\d+|None), child (?P<child>-?\d+|None)\)")
_SHORT = re.compile(r"^(?P<kind>FAILED|ERROR) (?P<node>\S+::\S+)(?: - (?P<reason>.*))?$")
_SPLIT_HEADER = re.compile(r"\s{2,}")
_GLUED = re.compile(r"^(N/A|[-+]?\d+\.\d+)([A-Za-z].*)$")


def norm_dtype(dtype: Any) -> str:
    """``torch.float16`` -> ``float16``; anything else as text."""
    s = str(dtype).strip() if dtype is not None else ""
    return s[6:] if s.startswith("torch.") else s


@dataclass(slots=True)
class CaseRow:
    """One measured case: an (op, dtype, shape) of one benchmark, from one source.

    Built by the parsers; :func:`merge_rows` fills a record-log row's missing fields
    from the run.log row of the same key. Latencies are milliseconds, ``*_rsd`` are
    fractions (run.log's ``Noise(%)`` is divided by 100), ``speedup`` is
    torch / library as the suite computed it.
    """

    op: str
    dtype: str
    shape: str
    occurrence: int = 1
    status: str = "SUCCESS"
    torch_ms: float | None = None
    lib_ms: float | None = None
    speedup: float | None = None
    tflops: float | None = None
    torch_gbps: float | None = None
    lib_gbps: float | None = None
    torch_timer: str | None = None
    lib_timer: str | None = None
    torch_samples: int | None = None
    lib_samples: int | None = None
    torch_rsd: float | None = None
    lib_rsd: float | None = None
    # the half width of the latency's bootstrap 95 % interval over the latency (record.log's
    # ``ci_base``/``ci``, a fraction; run.log does not print it)
    torch_ci: float | None = None
    lib_ci: float | None = None
    repeats: int | None = None  # processes merged into this row (--repeats)
    torch_spread: float | None = None  # max/min - 1 between those processes
    lib_spread: float | None = None
    speedup_spread: float | None = None
    # the profiler timer's host-inclusive latency (ms) beside its device figure
    torch_host_ms: float | None = None
    lib_host_ms: float | None = None
    # why the graph timer fell back: "<phase>: <kind>: <the error's line>"
    torch_fallback: str | None = None
    lib_fallback: str | None = None
    # the graph figure a like-with-like row replaced by the other side's timer
    torch_graph_ms: float | None = None
    lib_graph_ms: float | None = None
    mode: str | None = None
    level: str | None = None
    error: str | None = None
    source: str = ""
    # the pytest node that measured the row (``benchmark/test_abs.py::test_abs``): the
    # record entry's ``test_case`` (opscreen's child adds it; FlagGems' --record json has it)
    test_case: str | None = None

    @property
    def test(self) -> str:
        return "" if self.occurrence == 1 else f"#{self.occurrence}"

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.op, self.test, self.dtype, self.shape)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["test"] = self.test
        return d


_FILLABLE = [f.name for f in fields(CaseRow) if f.name not in ("op", "dtype", "shape", "occurrence", "status", "source")]


@dataclass(slots=True)
class Failure:
    """A failed pytest item named in the log, with the best reason the log gives."""

    node: str
    reason: str | None
    kind: str = "FAILED"  # FAILED | ERROR | FATAL


@dataclass
class ParsedLog:
    """What one file gave: its rows (in file order) and what the log says around them."""

    source: str
    rows: list[CaseRow] = field(default_factory=list)
    truncated: bool = False
    tables: int = 0
    bad_lines: int = 0
    failures: list[Failure] = field(default_factory=list)
    fatal: str | None = None
    session_line: str | None = None
    nodes: list[str] = field(default_factory=list)
    # from the harness's end banner, when the log has one: how the child ended
    child_status: str | None = None
    child_returncode: int | None = None


def _num(tok: str) -> float | None:
    if tok == "N/A" or tok == "-":
        return None
    try:
        v = float(tok)
    except ValueError:
        return None
    return v


def _finite(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


_INF = float("inf")


def _fin(v: Any) -> float | None:
    """Fast path of :func:`_finite` for the common float / None values."""
    if v is None:
        return None
    if type(v) is float:
        return v if (v == v and v != _INF and v != -_INF) else None
    return _finite(v)


def _int(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        try:
            return int(float(v))
        except (TypeError, ValueError):
            return None


# public names for the other readers of record fields (results/records.py)
finite_or_none = _fin
int_or_none = _int


class _Occurrences:
    """Counts repeats of (op, dtype, shape) within one file, in order."""

    __slots__ = ("seen",)

    def __init__(self):
        self.seen: dict[tuple[str, str, str], int] = {}

    def __call__(self, op: str, dtype: str, shape: str) -> int:
        k = (op, dtype, shape)
        n = self.seen.get(k, 0) + 1
        self.seen[k] = n
        return n


# ---------------------------------------------------------------- run.log tables

_NUMERIC_FIELDS = {"torch_ms", "lib_ms", "speedup", "tflops", "torch_gbps", "lib_gbps"}


def _column_field(name: str, seen: set[str]) -> str:
    n = name.strip().lower()
    if n == "status":
        return "status"
    if "size detail" in n or n == "shape":
        return "shape"
    if "latency" in n:
        if n.startswith("torch") and "torch_ms" not in seen:
            return "torch_ms"
        return "lib_ms" if "lib_ms" not in seen else f"extra:{name.strip()}"
    if "speedup" in n:
        return "speedup" if "speedup" not in seen else f"extra:{name.strip()}"
    if n == "tflops":
        return "tflops"
    if "gbps" in n:
        return "torch_gbps" if n.startswith("torch") else "lib_gbps"
    if n == "timer":
        return "timer"
    if n == "samples":
        return "samples"
    if n.startswith("noise"):
        return "noise"
    return f"extra:{name.strip()}"


@dataclass(slots=True)
class _Layout:
    numeric: list[str]  # numeric fields in header order
    tags: list[str]  # tag fields (timer, samples, noise, extra:...) in header order
    drops: list[tuple[str, ...]]  # optional numeric groups, in the order they may be dropped


def _layout(header: str) -> _Layout | None:
    names = [n for n in _SPLIT_HEADER.split(header.strip()) if n]
    if not names or names[0].strip().lower() != "status":
        return None
    seen: set[str] = set()
    cols = []
    for name in names[1:]:
        f = _column_field(name, seen)
        seen.add(f)
        cols.append(f)
    if cols and cols[-1] == "shape":
        cols = cols[:-1]
    numeric = [c for c in cols if c in _NUMERIC_FIELDS]
    tags = [c for c in cols if c not in _NUMERIC_FIELDS and c != "shape"]
    groups = []
    if "tflops" in numeric:
        groups.append(("tflops",))
    gb = tuple(c for c in ("torch_gbps", "lib_gbps") if c in numeric)
    if gb:
        groups.append(gb)
    drops: list[tuple[str, ...]] = []
    # FlagGems omits TFLOPS in a row whose tflops is 0, and both GBPS in a row without gbps
    for g in groups:
        drops.append(g)
    if len(groups) == 2:
        drops.append(groups[0] + groups[1])
    return _Layout(numeric, tags, drops)


def _pair(tok: str) -> tuple[str | None, str | None]:
    if tok in ("-", "N/A", ""):
        return None, None
    if "|" in tok:
        a, _, b = tok.partition("|")
        return (a if a not in ("-", "N/A", "") else None), (b if b not in ("-", "N/A", "") else None)
    return tok, tok


def _parse_legend(text: str) -> dict[int, Any] | None:
    """``[1]=1, [3]=torch.float16`` -> {1: 1, 3: "torch.float16"}."""
    try:
        toks = tokenize(text)
        out: dict[int, Any] = {}
        i = 0
        while i < len(toks):
            if toks[i][1] == ",":
                i += 1
                continue
            if toks[i][1] != "[" or toks[i + 1][0] != "num" or toks[i + 2][1] != "]" or toks[i + 3][1] != "=":
                return None
            idx = int(toks[i + 1][1])
            val, i = parse_value_at(toks, i + 4)
            out[idx] = val
        return out
    except (ShapeSyntaxError, IndexError, ValueError, KeyError, SyntaxError):
        return None


_legend_cache: dict[tuple[str, str], str] = {}


def _folded_key(shape_text: str, legend: dict[int, Any], legend_text: str) -> str:
    ck = (legend_text, shape_text)
    key = _legend_cache.get(ck)
    if key is not None:
        return key
    base = shape_key(shape_text)
    if base.startswith("?"):
        key = base
    else:
        obj = json.loads(base)
        if isinstance(obj, list):
            for idx in sorted(legend):
                obj.insert(idx, legend[idx])
        key = key_of(obj)
    if len(_legend_cache) < 100_000:
        _legend_cache[ck] = key
    return key


def _parse_title_args(args: str) -> dict[str, str]:
    out = {}
    for part in args.split(","):
        k, sep, v = part.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def parse_run_log_text(text: str, source: str = "run.log", *, rows: bool = True) -> ParsedLog:
    """Parse captured pytest output holding FlagGems or opscreen result tables.

    ``rows=False`` reads only what surrounds the tables (table count, truncation,
    failures): the summary's fast path when the record log already has every row.
    """
    return _RunLogReader(text, source, rows).read()


class _RunLogReader:
    """One pass over a run log: the result tables (title, legend, columns, rows)
    and what surrounds them (failures, the fatal line, banners, test nodes)."""

    def __init__(self, text: str, source: str, rows: bool):
        self.res = ParsedLog(source=source)
        if "\x1b" in text:
            text = _ANSI.sub("", text)
        self.text, self.source, self.rows = text, source, rows
        self.state = 0  # 0 outside, 1 after title, 2 after columns, 3 in rows
        self.op = self.dtype = self.mode = self.level = None
        self.layout: _Layout | None = None
        self.legend: dict[int, Any] | None = None
        self.legend_text = ""
        self.occ = _Occurrences()
        self.section: str | None = None
        self.section_reason: dict[str, str] = {}
        self.short: list[Failure] = []
        self.session_after_table = False

    def read(self) -> ParsedLog:
        lines = self.text.split("\n")
        ends_cleanly = self.text.endswith("\n")
        last = len(lines) - 1
        for idx, line in enumerate(lines):
            if self.state == 3:
                if self._table_row(line, idx == last and not ends_cleanly):
                    continue
                self.state = 0
            if not line:
                continue
            c = line[0]
            if c == "O" and line.startswith("Operator:"):
                self._title(line)
                continue
            if self.state in (1, 2) and self._table_head(line):
                continue
            # outside a table: pytest noise, tracebacks, summaries, harness banners
            self._outside(line, c)
        return self._finish()

    def _table_row(self, line: str, cut_here: bool) -> bool:
        """A row of the table being read (True), or the line that ends it (False)."""
        res = self.res
        if not self.rows:
            return line.startswith(STATUS_WORDS)
        sp = line.split()
        if not (sp and sp[0] in STATUS_WORDS):
            return False
        row = _parse_row(sp, self.layout, self.op, self.dtype, self.mode, self.level, self.legend,
                         self.legend_text, self.occ, self.source)
        if cut_here and (row is None or row.shape.startswith("?") or not _row_complete(line)):
            res.truncated = True  # the kill cut this row short
        elif row is None:
            res.bad_lines += 1
        else:
            res.rows.append(row)
        return True

    def _title(self, line: str) -> None:
        m = _TITLE.match(line)
        if m:
            a = _parse_title_args(m.group("args"))
            self.op, self.dtype = m.group("op"), norm_dtype(a.get("dtype", ""))
            self.mode, self.level = a.get("mode"), a.get("level")
            self.legend, self.legend_text, self.layout = None, "", None
            self.state = 1
            self.res.tables += 1
            self.session_after_table = False

    def _table_head(self, line: str) -> bool:
        """The legend, column header or rule under a title (True); else the table is
        over before its rows (state 0, False)."""
        if self.state == 1:
            if line.startswith("Same in every row:"):
                self.legend_text = line.split(":", 1)[1].strip()
                self.legend = _parse_legend(self.legend_text)
                if self.legend is None:
                    self.res.bad_lines += 1
                return True
            if line.startswith("Status"):
                self.layout = _layout(line)
                self.state = 2 if self.layout is not None else 0
                return True
        elif line.startswith("---"):
            self.state = 3
            return True
        self.state = 0
        return False

    def _outside(self, line: str, c: str) -> None:
        res = self.res
        if c == "=" or c.isdigit() or c == "n":
            if _SESSION_END.match(line):
                res.session_line = line.strip("= ").strip()
                self.session_after_table = True
                return
        if c == "_":
            m = _SECTION.match(line)
            if m:
                self.section = m.group("name")
                return
        if c == "E" and line.startswith("E ") and self.section is not None and self.section not in self.section_reason:
            msg = line[1:].strip()
            if msg:
                self.section_reason[self.section] = msg
            return
        if c in "FE":
            m = _SHORT.match(line)
            if m:
                self.short.append(Failure(m.group("node"), m.group("reason"), m.group("kind")))
                return
        if c == "O" and line.startswith("OPSCREEN-FATAL:"):
            res.fatal = line[len("OPSCREEN-FATAL:") :].strip()
            return
        if c == "[" and line.startswith("[opscreen] result "):
            m = _END_BANNER.match(line)
            if m:
                res.child_status = m.group("status")
                child = m.group("child")
                res.child_returncode = None if child == "None" else int(child)
                return
        if "::" in line and ".py::" in line:
            node = line.split()[0]
            if ".py::" in node and node not in res.nodes:
                res.nodes.append(node)

    def _finish(self) -> ParsedLog:
        """The failures (short summary lines with their sections' reasons), truncation."""
        res = self.res
        for f in self.short:
            func = f.node.rsplit("::", 1)[-1]
            better = self.section_reason.get(func) or self.section_reason.get(f.node)
            if better:
                f.reason = better
            res.failures.append(f)
        if not self.short:
            for name, reason in self.section_reason.items():
                res.failures.append(Failure(name, reason))
        if res.fatal:
            res.failures.append(Failure("", res.fatal, "FATAL"))
        if not self.session_after_table and self.text.strip():
            # pytest prints its session line last; a log without one after the last table
            # was cut short (timeout, kill, crash) unless the child ended on its own first
            res.truncated = _cut_short(res)
        return res


def _cut_short(res: ParsedLog) -> bool:
    """For a log with no pytest session line after its last table: was it cut short?

    Without the harness's end banner (the harness itself was killed, or the text is
    not an opscreen run.log): yes. With it: yes when the harness killed the child
    (``timeout``, ``interrupted``) or a signal did (a negative return code); a
    child that exited on its own (or never started) before printing any table left
    nothing unsaid (pytest not installed, a usage error, a device-fatal exit); one
    that exited among its tables may have left rows out."""
    if res.child_status is None:
        return True
    if res.child_status in ("timeout", "interrupted"):
        return True
    rc = res.child_returncode
    if rc is not None and rc < 0:
        return True
    return res.tables > 0


def _row_complete(line: str) -> bool:
    s = line.rstrip()
    return s.endswith("]") or s.endswith("}") or s.endswith(")") or s.endswith("N/A")


def _parse_row(sp, layout, op, dtype, mode, level, legend, legend_text, occ, source) -> CaseRow | None:
    if layout is None or op is None:
        return None
    numeric = layout.numeric
    n = len(numeric)
    i = 1
    vals: list[str] = []
    while i < len(sp) and len(vals) < n:
        tok = sp[i]
        if not _NUM.match(tok):
            m = _GLUED.match(tok) if layout.tags else None
            if m is None:
                break
            # a timer cell wider than its column touches the number before it:
            # "1.031graph|graph-fallback:capture" -> "1.031", "graph|graph-fallback:capture"
            sp = sp[:i] + [m.group(1), m.group(2)] + sp[i + 1 :]
            tok = sp[i]
        vals.append(tok)
        i += 1
    ntag = len(layout.tags)
    tags = sp[i : i + ntag]
    i += ntag
    if len(tags) < ntag:
        return None
    shape_text = " ".join(sp[i:])
    if not shape_text:
        if vals and vals[-1] == "N/A" and not ntag:  # the shape detail itself was N/A
            vals.pop()
            shape_text = "N/A"
        else:
            return None
    if len(vals) < 2:
        return None
    cols = numeric
    if len(vals) != n:
        for drop in layout.drops:
            if n - len(drop) == len(vals):
                cols = [c for c in numeric if c not in drop]
                break
        else:
            cols = numeric[: len(vals)]
    row = CaseRow(op=op, dtype=dtype or "", shape="", status=sp[0], mode=mode, level=level, source=source)
    for c, v in zip(cols, vals):
        setattr(row, c, _num(v))
    for c, tok in zip(layout.tags, tags):
        if c == "timer":
            row.torch_timer, row.lib_timer = _pair(tok)
        elif c == "samples":
            a, b = _pair(tok)
            row.torch_samples, row.lib_samples = _int(a), _int(b)
        elif c == "noise":
            a, b = _pair(tok)
            fa, fb = _finite(a), _finite(b)
            row.torch_rsd = round(fa / 100.0, 10) if fa is not None else None
            row.lib_rsd = round(fb / 100.0, 10) if fb is not None else None
    if shape_text == "N/A":
        shape = "null"
    elif legend:
        shape = _folded_key(shape_text, legend, legend_text)
    else:
        shape = shape_key(shape_text)
    if shape.startswith("?") and not _row_complete(shape_text):
        return None
    row.shape = shape
    row.occurrence = occ(op, row.dtype, shape)
    return row


def parse_run_log(path: str | Path, *, rows: bool = True) -> ParsedLog:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ParsedLog(source=str(p))
    return parse_run_log_text(text, source=p.name, rows=rows)


# ---------------------------------------------------------------- record logs

def _row_from_record(entry: dict, r: dict, occ: _Occurrences, source: str) -> CaseRow | None:
    if not isinstance(r, dict):
        return None
    op = str(entry.get("op_name") or "")
    dtype = norm_dtype(entry.get("dtype"))
    sd = r.get("shape_detail")
    _finite = _fin
    try:
        shape = key_of(sd)
    except (TypeError, ValueError):
        shape = "?" + str(sd)
    err = r.get("error_msg")
    row = CaseRow(
        op=op,
        dtype=dtype,
        shape=shape,
        status="FAILED" if err else "SUCCESS",
        torch_ms=_finite(r.get("latency_base")),
        lib_ms=_finite(r.get("latency")),
        speedup=_finite(r.get("speedup")),
        tflops=_finite(r.get("tflops")),
        torch_gbps=_finite(r.get("gbps_base")),
        lib_gbps=_finite(r.get("gbps")),
        torch_timer=r.get("timer_base"),
        lib_timer=r.get("timer"),
        torch_samples=_int(r.get("samples_base")),
        lib_samples=_int(r.get("samples")),
        torch_rsd=_finite(r.get("rsd_base")),
        lib_rsd=_finite(r.get("rsd")),
        torch_ci=_finite(r.get("ci_base")),
        lib_ci=_finite(r.get("ci")),
        repeats=_int(r.get("repeats")),
        torch_spread=_finite(r.get("spread_base")),
        lib_spread=_finite(r.get("spread")),
        speedup_spread=_finite(r.get("speedup_spread")),
        torch_host_ms=_finite(r.get("host_ms_base")),
        lib_host_ms=_finite(r.get("host_ms")),
        torch_fallback=_text(r.get("fallback_base")),
        lib_fallback=_text(r.get("fallback")),
        torch_graph_ms=_finite(r.get("graph_ms_base")),
        lib_graph_ms=_finite(r.get("graph_ms")),
        mode=entry.get("mode"),
        level=entry.get("level"),
        error=str(err) if err else None,
        source=source,
        test_case=str(entry["test_case"]) if entry.get("test_case") else None,
    )
    row.occurrence = occ(op, dtype, shape)
    return row


def _text(v: Any) -> str | None:
    return str(v) if v not in (None, "") else None


def _rows_from_entries(entries: Iterable[Any], res: ParsedLog, occ: _Occurrences) -> None:
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("result"), list):
            continue  # the logger's banner, --query attributes, ...
        res.tables += 1
        for r in entry["result"]:
            row = _row_from_record(entry, r, occ, res.source)
            if row is not None:
                res.rows.append(row)


def record_entries(text: str) -> tuple[list[Any], bool, int]:
    """The JSON entries of a record log's ``[INFO] {json}`` lines, in file order, each
    once (two log handlers can write the same entry), with ``truncated`` (a cut-off
    last line) and the number of other lines that held no valid JSON."""
    lines = text.split("\n")
    last = len(lines) - 1
    entries = []
    truncated, bad = False, 0
    seen: set[str] = set()
    for idx, line in enumerate(lines):
        b = line.find("{")
        if b < 0:
            continue
        body = line[b:].rstrip()
        if body in seen:
            # the same entry written twice by two log handlers ("[INFO] {..}" and
            # pytest's "INFO  logger:file.py:94 {..}"): one measurement, one entry
            continue
        seen.add(body)
        try:
            obj = json.loads(body)
        except ValueError:
            if idx >= last - 1 and not body.endswith("}"):
                truncated = True
            else:
                bad += 1
            continue
        entries.append(obj)
    return entries, truncated, bad


def parse_record_log_text(text: str, source: str = "record.log") -> ParsedLog:
    """Parse ``[INFO] {json}`` lines; a cut-off last line sets ``truncated``."""
    res = ParsedLog(source=source)
    entries, res.truncated, res.bad_lines = record_entries(text)
    _rows_from_entries(entries, res, _Occurrences())
    return res


def parse_record_log(path: str | Path) -> ParsedLog:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ParsedLog(source=str(p))
    return parse_record_log_text(text, source=p.name)


def parse_record_json(path_or_obj: Any, source: str = "record.json") -> ParsedLog:
    """Parse FlagGems' ``--record json`` output: ``{op: {details, result, test_case, reason}}``."""
    if isinstance(path_or_obj, (str, Path)):
        p = Path(path_or_obj)
        source = p.name
        try:
            obj = json.loads(p.read_text(encoding="utf-8", errors="replace"))
        except (OSError, ValueError):
            return ParsedLog(source=source, truncated=True)
    else:
        obj = path_or_obj
    res = ParsedLog(source=source)
    occ = _Occurrences()
    if isinstance(obj, list):
        _rows_from_entries(obj, res, occ)
        return res
    if not isinstance(obj, dict):
        return res
    if "result" in obj and isinstance(obj.get("result"), list):
        _rows_from_entries([obj], res, occ)
        return res
    for name, block in obj.items():
        if not isinstance(block, dict):
            continue
        node = block.get("test_case")
        if node:
            res.nodes.append(str(node))
        first = len(res.rows)
        _rows_from_entries(block.get("details") or [], res, occ)
        for row in res.rows[first:]:
            row.test_case = row.test_case or (str(node) if node else None)
        if block.get("result") not in (None, "passed"):
            res.failures.append(Failure(str(node or name), block.get("reason")))
    return res


def parse_file(path: str | Path) -> ParsedLog:
    """Parse by content: record log, record json, or captured output."""
    p = Path(path)
    try:
        head = p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ParsedLog(source=str(p))
    stripped = head.lstrip()
    if stripped.startswith("{") or stripped.startswith("["):
        try:
            return parse_record_json(json.loads(head), source=p.name)
        except ValueError:
            pass
    if "[INFO] {" in head[:4096] and "Performance Test" not in head[:4096]:
        return parse_record_log_text(head, source=p.name)
    return parse_run_log_text(head, source=p.name)


# ---------------------------------------------------------------- merging

def merge_rows(primary: list[CaseRow], secondary: list[CaseRow]) -> list[CaseRow]:
    """Rows of ``primary`` (the record log) completed by ``secondary`` (run.log).

    Fields missing from a primary row are taken from the secondary row of the same
    key; secondary rows with no primary counterpart are appended in their order.
    """
    if not secondary:
        return primary
    if not primary:
        return secondary
    by_key = {r.key: r for r in secondary}
    out = []
    used = set()
    for r in primary:
        s = by_key.get(r.key)
        if s is not None:
            used.add(r.key)
            for name in _FILLABLE:
                if getattr(r, name) is None:
                    v = getattr(s, name)
                    if v is not None:
                        setattr(r, name, v)
        out.append(r)
    for s in secondary:
        if s.key not in used:
            out.append(s)
    return out
