"""What a batch run shows while it runs.

On a terminal (``sys.stdout.isatty()``): a live view (``rich.live.Live``) with
one lane per device (current op, attempt, elapsed), done/total, failures and an
ETA. Off a terminal (CI logs, pipes) or with ``--plain``: one plain line per finished op
(with the ETA of the rest, while ops are left) and one per event (device marked bad,
interruption), nothing else.

Both are driven from the runner's main thread only.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

OK_STATUSES = ("passed", "skipped", "dismissed", "passed_own_dtypes")


def fmt_secs(s: float | None) -> str:
    if s is None:
        return "-"
    s = max(0.0, s)
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(s + 0.5), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


@dataclass
class Lane:
    device: int
    op: str | None = None
    detail: str = ""
    since: float = 0.0
    state: str = "idle"  # idle | running | bad | done


@dataclass
class Counters:
    total: int = 0
    done: int = 0  # finished this run + already complete
    done_before: int = 0
    failed: int = 0
    started_at: float = field(default_factory=time.monotonic)

    def eta(self, running: int) -> float | None:
        finished_now = self.done - self.done_before
        left = self.total - self.done
        if finished_now <= 0 or left <= 0:
            return None if left > 0 else 0.0
        return (time.monotonic() - self.started_at) / finished_now * left


class PlainProgress:
    """One line per finished op: ``[ 3/15] passed   ok_a  dev 0  0.4s  ETA 4.8s  ...``."""

    eta_in_lines = True

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stdout
        self.c = Counters()
        self.lanes: dict[int, Lane] = {}

    def start(self, total: int, done_before: int, devices: list[int], header: str = "") -> None:
        self.c = Counters(total=total, done=done_before, done_before=done_before)
        self.lanes = {d: Lane(d) for d in devices}
        if header:
            self._print(header)

    def lane_started(self, device: int, op: str, detail: str = "") -> None:
        lane = self.lanes.setdefault(device, Lane(device))
        if lane.op != op:
            lane.since = time.monotonic()
        lane.op, lane.detail, lane.state = op, detail, "running"

    def lane_idle(self, device: int) -> None:
        lane = self.lanes.setdefault(device, Lane(device))
        if lane.state != "bad":
            lane.op, lane.detail, lane.state = None, "", "idle"

    def lane_bad(self, device: int, reason: str) -> None:
        lane = self.lanes.setdefault(device, Lane(device))
        lane.op, lane.detail, lane.state = None, reason, "bad"

    def op_finished(self, op: str, status: str, device: int | None, duration_s: float | None, note: str = "") -> None:
        self.c.done += 1
        if status not in OK_STATUSES:
            self.c.failed += 1
        width = len(str(self.c.total))
        dev = "-" if device is None else str(device)
        line = f"[{self.c.done:>{width}}/{self.c.total}] {status:<12} {op}  dev {dev}  {fmt_secs(duration_s)}"
        if self.eta_in_lines and self.c.done < self.c.total:  # the live view shows it in its footer
            line += f"  ETA {fmt_secs(self.c.eta(0))}"
        if note:
            line += f"  {note}"
        self._print(line)

    def message(self, text: str) -> None:
        self._print(text)

    def tick(self) -> None:
        pass

    def close(self) -> None:
        try:
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def _print(self, line: str) -> None:
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass


class LiveProgress(PlainProgress):
    """A ``rich`` live view: a lane per device, totals, failures and an ETA.
    Finished ops and events scroll above the live table."""

    eta_in_lines = False

    def __init__(self, stream: TextIO | None = None):
        super().__init__(stream)
        from rich.console import Console

        self.console = Console(file=self.stream)
        self.live = None

    def start(self, total: int, done_before: int, devices: list[int], header: str = "") -> None:
        from rich.live import Live

        super().start(total, done_before, devices, header="")
        if header:
            self.console.print(header, markup=False, highlight=False)
        self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=True)
        self.live.start()

    def _print(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False)

    def tick(self) -> None:
        if self.live is not None:
            self.live.update(self._render())

    def _render(self):
        from rich.table import Table
        from rich.text import Text

        now = time.monotonic()
        table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
        table.add_column("device", justify="right")
        table.add_column("op")
        table.add_column("elapsed", justify="right")
        table.add_column("")
        running = 0
        for d in sorted(self.lanes):
            lane = self.lanes[d]
            if lane.state == "running":
                running += 1
                table.add_row(str(d), lane.op or "", fmt_secs(now - lane.since), lane.detail)
            elif lane.state == "bad":
                table.add_row(str(d), Text("BAD", style="bold red"), "", lane.detail)
            else:
                table.add_row(str(d), Text("idle", style="dim"), "", "")
        c = self.c
        fails = Text(f"{c.failed} not passed", style="red" if c.failed else "green")
        foot = Text.assemble(
            f"done {c.done}/{c.total}  ",
            fails,
            f"  elapsed {fmt_secs(now - c.started_at)}  ETA {fmt_secs(c.eta(running))}",
        )
        from rich.console import Group

        return Group(table, foot)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
        super().close()


def make_progress(stream: TextIO | None = None, live: bool | None = None) -> PlainProgress:
    stream = stream or sys.stdout
    if live is None:
        try:
            live = stream.isatty()
        except (AttributeError, ValueError):
            live = False
    return LiveProgress(stream) if live else PlainProgress(stream)
