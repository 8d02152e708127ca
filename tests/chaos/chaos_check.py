#!/usr/bin/env python3
"""Chaos suite: the process watcher and the invariant checker.

The execution log (one O_APPEND file, written by tests/chaos/item.sh) has
one line per event, times in wall-clock ms (one machine, one clock):
  START job item instance pid pgid ms token seconds
  END   job item instance pid pgid ms      (the item finished)
  STOP  job item instance pid pgid ms      (the item got SIGTERM and exits)
The watcher appends to a second file, for every pid of a START line,
  GONE pid ms                              (first seen dead or a zombie)
and the driver writes the faults to a third:
  FAULT kind instance start_ms end_ms      (end = when healed)

  chaos_check.py watch LOG GONE STOPFILE
  chaos_check.py check LOG GONE FAULTS --from MS --to MS --period S
                       --items N --session-ms MS [--margin-ms MS]
                       [--busy-gap-ms MS]
check prints the figures and exits 1 on a violation:
  overlap   one item alive in two processes at overlapping times
  lost      a fire of an item with no START in its period, no run of the
            item going on when it came, and no instance busy with the job
            then that started the item without a pause after (fires folded
            into a misfire re-run), outside every fault's detection window
            [fault start, fault end + session + margin]
  orphan    an item process of a kill -9'd instance (or of an instance
            whose zygote got kill -9) alive at kill + session timeout, or
            any item process alive at the end
"""
import os
import sys
import time


def now_ms():
    return int(time.time() * 1000)


def parse(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                p = line.split()
                if p:
                    out.append(p)
    except FileNotFoundError:
        pass
    return out


def alive(pid):
    """True while pid runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rfind(")") + 2] not in "ZX"


def boot_time_s():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return int(line.split()[1])
    return 0


def pgid_members(pgids, started_before_ms):
    """pid -> pgid of every live process whose group is in pgids and that
    started before started_before_ms (a later one only reuses the id)."""
    found = {}
    btime = boot_time_s()
    hz = os.sysconf("SC_CLK_TCK")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        rest = st[st.rfind(")") + 2:].split()
        if rest[0] in "ZX":
            continue
        started_ms = (btime + int(rest[19]) / hz) * 1000
        if int(rest[2]) in pgids and started_ms < started_before_ms:
            found[int(d)] = int(rest[2])
    return found


class _Exits:
    """The pids whose end is awaited: by pidfd and poll where the system
    has them (a wake-up at each exit, no per-pid probe), else by reading
    /proc/{pid}/stat of each one at every round."""

    def __init__(self):
        import select
        self.poller = select.poll() if hasattr(os, "pidfd_open") else None
        self.fds = {}  # fd -> pid (pidfd mode)
        self.pids = set()  # polled mode

    def add(self, pid):
        """False when pid is gone already."""
        if self.poller is not None:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                return False
            except OSError:
                self.poller = None  # no pidfds here: probe /proc instead
            else:
                self.fds[fd] = pid
                self.poller.register(fd, 0x1)  # POLLIN: the process ended
                return True
        if not alive(pid):
            return False
        self.pids.add(pid)
        return True

    def wait(self, ms):
        """The pids seen ended within ms."""
        ended = [pid for pid in self.pids if not alive(pid)]
        self.pids.difference_update(ended)
        if self.poller is None or not self.fds:
            time.sleep(ms / 1000)
            return ended
        for fd, _ in self.poller.poll(0 if ended else ms):
            self.poller.unregister(fd)
            os.close(fd)
            ended.append(self.fds.pop(fd))
        return ended


def watch(log, gone_path, stopfile):
    exits = _Exits()
    watching = set()  # a pid ends its watch when it ends: pids are reused
    buf = b""
    with open(log, "ab+") as f:
        pos = 0
        while True:
            size = os.fstat(f.fileno()).st_size
            ended = []
            if size > pos:
                f.seek(pos)
                chunk = f.read(size - pos)
                pos += len(chunk)
                buf += chunk
                lines = buf.split(b"\n")
                buf = lines.pop()
                for line in lines:
                    p = line.split()
                    if len(p) >= 6 and p[0] == b"START":
                        pid = int(p[4])
                        if pid in watching:
                            continue
                        if exits.add(pid):
                            watching.add(pid)
                        else:
                            ended.append(pid)
            ended += exits.wait(20)
            watching.difference_update(ended)
            if ended:
                t = now_ms()
                with open(gone_path, "a") as g:
                    for pid in ended:
                        g.write(f"GONE {pid} {t}\n")
            if os.path.exists(stopfile):
                return 0


def check(argv):
    import argparse

    ap = argparse.ArgumentParser(prog="chaos_check.py check")
    ap.add_argument("log")
    ap.add_argument("gone")
    ap.add_argument("faults")
    ap.add_argument("--from", dest="t_from", type=int, required=True)
    ap.add_argument("--to", dest="t_to", type=int, required=True)
    ap.add_argument("--period", type=int, required=True)
    ap.add_argument("--items", type=int, required=True)
    ap.add_argument("--session-ms", type=int, required=True)
    ap.add_argument("--margin-ms", type=int, default=None)
    # The longest pause of an instance still busy with the job between two
    # runs: the misfire loop's (under a second), or a retry's back-off.
    ap.add_argument("--busy-gap-ms", type=int, default=1000)
    a = ap.parse_args(argv)
    period_ms = a.period * 1000
    margin = a.margin_ms if a.margin_ms is not None else period_ms
    # Pids are reused over a long run (pid_max may be 32768): a run is one
    # START and the next END/STOP of its pid, and a GONE counts for the run
    # of that pid that started before it.
    gone = {}  # pid -> ascending times it was seen gone
    for p in parse(a.gone):
        if p[0] == "GONE":
            gone.setdefault(int(p[1]), []).append(int(p[2]))
    run_list = []
    open_run = {}  # pid -> the run of that pid without an end yet
    for p in parse(a.log):
        if p[0] not in ("START", "END", "STOP") or len(p) < 7:
            continue
        pid = int(p[4])
        if p[0] == "START":
            r = dict(job=p[1], item=int(p[2]), inst=p[3], pid=pid, pgid=int(p[5]),
                     start=int(p[6]), token=int(p[7]) if len(p) > 7 else 0, end=None,
                     how="running")
            run_list.append(r)
            open_run[pid] = r
        elif pid in open_run:
            r = open_run.pop(pid)
            r["end"] = int(p[6])
            r["how"] = p[0]
    end_of_check = now_ms()
    for r in run_list:
        if r["end"] is None:
            # Killed without a word: it lived until the watcher saw it gone.
            seen = [t for t in gone.get(r["pid"], []) if t >= r["start"]]
            r["end"] = seen[0] if seen else end_of_check
            r["how"] = "GONE" if seen else "ALIVE"
    runs = {i: r for i, r in enumerate(run_list)}
    faults = []
    for p in parse(a.faults):
        if p[0] == "FAULT":
            faults.append(dict(kind=p[1], inst=p[2], start=int(p[3]), end=int(p[4])))

    bad = []
    # ------------------------------------------------------------- overlaps
    by_item = {}
    for r in runs.values():
        by_item.setdefault((r["job"], r["item"]), []).append(r)
    overlaps = []
    for key, rs in sorted(by_item.items()):
        rs.sort(key=lambda r: r["start"])
        for i, x in enumerate(rs):
            for y in rs[i + 1:]:
                if y["start"] >= x["end"]:
                    continue
                ov = min(x["end"], y["end"]) - y["start"]
                overlaps.append(ov)
                bad.append(
                    f"overlap: {key[0]} item {key[1]} ran on {x['inst']} (pid {x['pid']}, "
                    f"{x['start']}..{x['end']} {x['how']}) and on {y['inst']} (pid {y['pid']}, "
                    f"{y['start']}..{y['end']} {y['how']}): {ov} ms at once")
    # ------------------------------------------------------------ lost fires
    def exempt(f0):
        f1 = f0 + period_ms
        return any(f0 < ft["end"] + a.session_ms + margin and ft["start"] < f1 for ft in faults)

    spans = {}
    for r in runs.values():
        spans.setdefault(r["item"], []).append((r["start"], r["end"]))

    # Per instance, its runs in start order: a fire that comes while an
    # instance runs anything of the job is folded into the misfire re-run
    # of every local item after the run (2.1.5's JobTriggerListener).
    by_inst = {}
    for r in runs.values():
        by_inst.setdefault(r["inst"], []).append((r["start"], r["end"], r["item"]))
    for rs in by_inst.values():
        rs.sort()

    def folded(item, f0):
        # The instance was busy at f0 and stayed busy (gaps under
        # --busy-gap-ms: the loop between re-runs, a retry's back-off) until
        # it started the item, or until a fault's detection window (what
        # follows a fault, a leader waiting to reshard, is the fault's).
        for rs in by_inst.values():
            busy_to = None
            for s0, e0, it in rs:
                if busy_to is None:
                    if s0 < f0 < e0:
                        busy_to = e0
                    continue
                if s0 > busy_to + a.busy_gap_ms:
                    if any(ft["start"] <= busy_to < ft["end"] + a.session_ms + margin
                           for ft in faults):
                        return True
                    break
                if it == item and s0 >= f0:
                    return True
                busy_to = max(busy_to, e0)
        return False

    def served(item, f0):
        # Started in the fire's period, or the fire came while a run of the
        # item was going on (2.1.5 folds such fires into one misfire re-run
        # after it, which the next period then sees start), or while its
        # instance ran other items and re-ran this one right after.
        return any(f0 <= s0 < f0 + period_ms or s0 < f0 < e0
                   for s0, e0 in spans.get(item, [])) or folded(item, f0)
    first = (a.t_from + period_ms - 1) // period_ms * period_ms
    fires = 0
    exempted = 0
    lost = 0
    f0 = first
    while f0 + period_ms <= a.t_to:
        if exempt(f0):
            exempted += 1
        else:
            for item in range(a.items):
                fires += 1
                if not served(item, f0):
                    lost += 1
                    bad.append(f"lost: item {item} of the fire at {f0} never started "
                               f"(no fault window covers it)")
        f0 += period_ms
    # --------------------------------------------------------------- orphans
    orphan_ms = []
    for ft in faults:
        if ft["kind"] not in ("kill9", "spawnerkill", "spawnerpartition"):
            continue
        for r in runs.values():
            if r["inst"] != ft["inst"] or not (r["start"] <= ft["start"] < r["end"]):
                continue
            took = r["end"] - ft["start"]
            orphan_ms.append(took)
            if took > a.session_ms:
                bad.append(f"orphan: item {r['item']} (pid {r['pid']}) of {ft['inst']} lived "
                           f"{took} ms after {ft['kind']} (session timeout {a.session_ms} ms)")
    last_start = max((r["start"] for r in runs.values()), default=0)
    left = pgid_members({r["pgid"] for r in runs.values()}, last_start + 5000)
    for pid, pg in sorted(left.items()):
        bad.append(f"left behind: pid {pid} of item group {pg} still runs")
    for r in runs.values():
        if r["how"] == "ALIVE" and alive(r["pid"]):
            bad.append(f"left behind: item pid {r['pid']} ({r['inst']}) never ended")
    # ---------------------------------------------------------------- tokens
    tokens_bad = 0
    for key, rs in by_item.items():
        last = 0
        for r in sorted(rs, key=lambda r: r["start"]):
            if r["token"] <= 0 or r["token"] < last:
                tokens_bad += 1
                bad.append(f"token: {key[0]} item {key[1]} on {r['inst']} started with fencing "
                           f"token {r['token']} after {last}")
            last = max(last, r["token"])

    # -------------------------------------------------------------- figures
    # Per fault on an instance: how long after the fault began its running
    # items ended (the fence after a cut, the supervisor after kill -9 or
    # SIGSTOP), and how long until another instance started each of them.
    figures = {}
    for ft in faults:
        for r in runs.values():
            if r["inst"] != ft["inst"] or not (r["start"] <= ft["start"] < r["end"]):
                continue
            fig = figures.setdefault(ft["kind"], dict(ended=[], elsewhere=[], gap=[]))
            fig["ended"].append(r["end"] - ft["start"])
            later = [y["start"] for y in by_item[(r["job"], r["item"])]
                     if y["inst"] != ft["inst"] and y["start"] >= ft["start"]]
            if later:
                fig["elsewhere"].append(min(later) - ft["start"])
                fig["gap"].append(min(later) - r["end"])

    def span(xs):
        xs = sorted(xs)
        return f"{xs[0]}..{xs[-1]} ms (median {xs[len(xs) // 2]}, {len(xs)})" if xs else "-"

    kinds = sorted({f["kind"] for f in faults})
    print(f"chaos check: {len(runs)} runs, {len(faults)} fault(s) {','.join(kinds) or '-'}; "
          f"{fires} item fires checked, {exempted} fire(s) inside fault windows; "
          f"overlaps {len(overlaps)}" + (f" (max {max(overlaps)} ms)" if overlaps else "") +
          f"; lost {lost}; left behind {len(left)}")
    if orphan_ms:
        print(f"chaos check: item processes gone after kill -9 in {min(orphan_ms)}..{max(orphan_ms)} ms "
              f"({len(orphan_ms)} item(s))")
    for kind, fig in sorted(figures.items()):
        print(f"chaos check: {kind}: the instance's running items ended {span(fig['ended'])} "
              f"after the fault began; started elsewhere after {span(fig['elsewhere'])}; "
              f"gap between the two {span(fig['gap'])}")
    for b in bad[:50]:
        print("VIOLATION " + b)
    if len(bad) > 50:
        print(f"... and {len(bad) - 50} more")
    if fires == 0:
        print("VIOLATION nothing checked: no fire outside the fault windows")
        return 1
    return 1 if bad else 0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "watch" and len(sys.argv) == 5:
        return watch(*sys.argv[2:5])
    if len(sys.argv) >= 2 and sys.argv[1] == "check":
        return check(sys.argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
