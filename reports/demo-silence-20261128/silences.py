"""Run a command as a user would see it, in a terminal, and print its longest silences.

The command runs under a pseudo-terminal 100 columns wide, so progress bars draw as they do for a
user; every chunk of output it writes ends a silence. Prints the exit status, the total time and
the longest silences with what ended each.

    python reports/demo-silence-20261128/silences.py -- .venv/bin/python -m fastcore_ops.training.train ...
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time


def silences(command: list[str]) -> tuple[int, float, list[tuple[float, float, str]]]:
    """(exit status, seconds in all, [(seconds silent, seconds from the start when it ended, what ended it)])."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a new pty is 0 columns wide
    start = last = time.monotonic()
    process = subprocess.Popen(command, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    gaps = []
    while True:
        ready, _, _ = select.select([master], [], [], 0.5)
        if not ready:
            if process.poll() is not None:
                break
            continue
        try:
            data = os.read(master, 65536)
        except OSError:  # the command closed its terminal
            break
        if not data:
            break
        now = time.monotonic()
        ending = data.decode(errors="replace").replace("\r", "\n").strip().splitlines() or [""]
        gaps.append((now - last, now - start, ending[-1][-100:]))
        last = now
    os.close(master)
    status = process.wait()
    end = time.monotonic()
    gaps.append((end - last, end - start, "(exit)"))
    return status, end - start, gaps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", type=int, default=8, help="how many of the longest silences to print")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    status, total, gaps = silences(command)
    print(f"exit status {status}, {total:.1f} s in all; the longest silences:")
    for gap, at, ending in sorted(gaps, reverse=True)[:args.show]:
        print(f"{gap:6.1f} s silent, until {at:6.1f} s: {ending}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
