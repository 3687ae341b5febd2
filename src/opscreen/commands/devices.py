"""``opscreen devices``: the devices a backend sees, and which source saw them."""

from __future__ import annotations

import os
import sys

from .. import settings as S
from ..tables import emit, table
from ._common import add_backend_arguments, print_json, selection_from

NAME = "devices"
HELP = "list the devices of a backend (vendor CLI and torch probe, each with a timeout)"
ORDER = 20


def add_arguments(p) -> None:
    add_backend_arguments(p)
    p.add_argument("--python", help="the suite's interpreter for the torch probe (default: this one)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--peaks", action="store_true",
                   help="measure each device's achievable peak (a device-to-device copy, a matmul per dtype) in the "
                        "suite's interpreter, print it beside the spec peak and save it (docs/peaks.md)")
    p.add_argument("--devices", default="0", metavar="LIST",
                   help="with --peaks: the devices to measure, comma-separated indices or 'all' (default 0)")
    p.add_argument("--peaks-dir", metavar="DIR",
                   help="with --peaks: where to save the peaks files (default $OPSCREEN_PEAKS_DIR, else "
                        "<data root>/peaks: where summary finds them)")


def run(args) -> int:
    S.enumeration_timeouts(os.environ)  # a bad one is one line, not "no devices found"
    sel = selection_from(args)
    b = sel.backend
    en = b.enumerate(args.python)
    if args.peaks:
        return peaks(args, b, en)
    if args.json:
        print_json(
            {
                "backend": b.name,
                "vendor": b.vendor,
                "selected_by": sel.source,
                "devices": [{"index": d.index, "name": d.name, "source": d.source} for d in en.devices],
                "sources_tried": en.sources_tried,
                "messages": en.messages,
            }
        )
        return 0
    print(f"backend {b.name} (vendor {b.vendor}, selected by {sel.source})")
    for msg in en.messages:
        print(f"  note: {msg}", file=sys.stderr)
    if not en.devices:
        print(f"  no {b.name} devices found (tried: {', '.join(en.sources_tried) or 'nothing'})")
        return 0
    t = table("index>", "name", "source")
    for d in en.devices:
        t.row(d.index, d.name, d.source)
    emit([t])
    if b.capabilities.slots:
        print("  on this backend --devices 0,1,... are parallel slots on the host")
    return 0


def _which(spec: str, en) -> list[int]:
    from ..errors import UsageError

    if spec.strip() == "all":
        return [d.index for d in en.devices] or [0]
    try:
        return [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--devices: '{spec}' is not a comma-separated list of indices or 'all'") from None


def peaks(args, b, en) -> int:
    """``devices --peaks``: measure, print spec and measured side by side, save; 1 when one failed."""
    from pathlib import Path

    from ..backends import peaks as P

    from ..errors import UsageError, check_writable_dir

    names = {d.index: d.name for d in en.devices}
    which = _which(args.devices, en)
    unknown = [d for d in which if d not in names] if names else [d for d in which if d != 0]
    if unknown:
        raise UsageError(f"--devices: no device {unknown[0]} on this backend (it has "
                         f"{', '.join(map(str, sorted(names))) or '0'}); opscreen devices lists them")
    if args.peaks_dir:
        check_writable_dir(args.peaks_dir, "--peaks-dir")
    out, rc = [], 0
    for dev in which:
        measured = P.measure_device(b, args.python, dev)
        if "error" in measured:
            print(f"opscreen devices --peaks: device {dev}: {measured['error']}", file=sys.stderr)
            rc = 1
            continue
        rec = P.peaks_record(b, dev, measured, names.get(dev))
        paths = P.save(rec, Path(args.peaks_dir) if args.peaks_dir else None)
        out.append((rec, paths))
    if args.json:
        print_json([{**rec, "saved": [str(p) for p in paths]} for rec, paths in out])
        return rc
    for rec, paths in out:
        print_peaks(rec)
        print("  saved " + ", ".join(str(p) for p in paths))
    return rc


def _num(v, nd=1) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def print_peaks(rec: dict) -> None:
    """One device's achievable peak beside its spec peak, with what the spec came from or why not."""
    dev, spec, ach = rec["device"], rec["spec"], rec["achievable"]
    print(f"device {dev['index']}: {dev.get('name') or '?'} ({rec['backend']}"
          + (f", uuid {dev['uuid']}" if dev.get("uuid") else "") + ")")
    m = rec["measurement"]
    t = table("peak", "measured>", "best>", "spread>", "spec>", "of spec>")
    copy = (m.get("copy") or {}).get("gbps") or {}
    bw = spec["bandwidth"].get("gbps")
    of = rec["of_spec"]
    t.row("copy GB/s (read+write)", _num(copy.get("median")), _num(copy.get("best")), _pct(copy.get("spread")),
          _num(bw), _pct(of["bandwidth"]))
    spec_t = spec["flops"].get("tflops") or {}
    for d, mm in (m.get("matmul") or {}).items():
        r = mm.get("tflops") or {}
        t.row(f"matmul {d} TFLOPS" + (f" (n {mm['n']})" if mm.get("n") else ""), _num(r.get("median"), 3),
              _num(r.get("best"), 3), _pct(r.get("spread")), _num(spec_t.get(d)), _pct(of["tflops"].get(d)))
    emit([t])
    for d, mm in (m.get("matmul") or {}).items():
        if mm.get("why"):
            print(f"  matmul {d}: not measured ({mm['why']})")
    if bw is not None:
        sb = spec["bandwidth"]
        print(f"  spec bandwidth: {sb['mem_clock_mhz']:g} MHz x {sb['ddr_factor']} x {sb['bus_width_bits']} bit / 8 (NVML)")
    else:
        print(f"  spec bandwidth: unknown ({spec['bandwidth'].get('why')})")
    sf = spec["flops"]
    if sf.get("tflops"):
        print(f"  spec FLOPs: {sf['sm_count']} SMs x {sf['sm_clock_mhz']:g} MHz x the sm_{sf['capability'].replace('.', '')} "
              f"table, {sf['convention']}" + (f"; {sf['note']}" if sf.get("note") else ""))
    else:
        print(f"  spec FLOPs: unknown ({sf.get('why')})")
    print(f"  measured: median of {copy.get('reps', '-')} copies, {m.get('threads')} torch thread(s), timer {m.get('timer')}")


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"
