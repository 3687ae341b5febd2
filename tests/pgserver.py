"""A throwaway PostgreSQL server for the store's tests: initdb in a temp folder, pg_ctl
start on a Unix socket there (no TCP: ``listen_addresses = ''``), stop and remove at the end.

The binaries are found on PATH, else under Debian's ``/usr/lib/postgresql/*/bin`` (``.ci/run``
installs the ``postgresql`` package where they are missing). PostgreSQL refuses to run as
root: as root the server runs as the ``postgres`` user (Debian's package creates it) through
``runuser``, its folder handed to that user. :func:`start` raises :class:`Unavailable` with the
reason when the server cannot be had; the fixture skips on it, or fails under CI (``CI=true``).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Unavailable", "Server", "start", "binaries"]


class Unavailable(Exception):
    """Why no server could be started (the text says what to install or fix)."""


def binaries() -> dict[str, str]:
    """initdb and pg_ctl: on PATH, else the newest of Debian's /usr/lib/postgresql/N/bin."""
    found = {n: shutil.which(n) for n in ("initdb", "pg_ctl")}
    if all(found.values()):
        return found  # type: ignore[return-value]
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
                    if Path(p).parent.name.isdigit() else 0, reverse=True):
        if all(os.access(os.path.join(d, n), os.X_OK) for n in found):
            return {n: os.path.join(d, n) for n in found}
    raise Unavailable("no PostgreSQL server binaries (initdb, pg_ctl) on PATH or under /usr/lib/postgresql/*/bin: "
                      "apt-get install postgresql")


def _free_port() -> int:
    """A port number no socket of this machine holds (the server listens on a Unix socket named by it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    base: Path  # the temp folder: data/, the socket, the log
    port: int
    user: str  # the database superuser (initdb -U)
    run_as: str | None  # the OS user the server runs as (None: this one)
    pg_ctl: str

    @property
    def socket_dir(self) -> str:
        return str(self.base)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@/{database}?host={self.socket_dir}&port={self.port}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(host=self.socket_dir, port=self.port, user=self.user, dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        _run(self.run_as, [self.pg_ctl, "-D", str(self.base / "data"), "-m", "immediate", "-w", "stop"], check=False)
        shutil.rmtree(self.base, ignore_errors=True)


def _run(user: str | None, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if check and res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
        raise Unavailable(f"{os.path.basename(argv[0 if user is None else 4])} failed ({res.returncode}): "
                          + " | ".join(tail))
    return res


def _os_user() -> str | None:
    """The OS user to run the server as: None when not root, else ``postgres``."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise Unavailable("running as root and no 'postgres' user to run the server as: apt-get install "
                          "postgresql creates it") from None
    if not shutil.which("runuser"):
        raise Unavailable("running as root and no runuser to start the server as 'postgres'")
    return "postgres"


def start() -> Server:
    """A running server (see the module's docstring); :class:`Unavailable` otherwise."""
    bins = binaries()
    user = _os_user()
    base = Path(tempfile.mkdtemp(prefix="opscreen-pg-"))
    if user is not None:
        pw = pwd.getpwnam(user)
        os.chown(base, pw.pw_uid, pw.pw_gid)
    port = _free_port()
    server = Server(base=base, port=port, user="opscreen", run_as=user, pg_ctl=bins["pg_ctl"])
    try:
        _run(user, [bins["initdb"], "-D", str(base / "data"), "-U", "opscreen", "-A", "trust", "-E", "UTF8",
                    "--no-sync"])
        opts = f"-c listen_addresses='' -c unix_socket_directories={base} -p {port} -c fsync=off"
        _run(user, [bins["pg_ctl"], "-D", str(base / "data"), "-l", str(base / "server.log"), "-o", opts,
                    "-w", "-t", "60", "start"])
    except Unavailable as exc:
        log = (base / "server.log")
        tail = log.read_text(errors="replace").strip().splitlines()[-2:] if log.is_file() else []
        server.stop()
        raise Unavailable(f"{exc}" + (f"; server log: {' | '.join(tail)}" if tail else "")) from None
    except BaseException:
        server.stop()
        raise
    return server
