#!/usr/bin/env python3
"""The chaos suite's own checks, checked: the watcher reports each item
process's end close to when it really ended (by pidfd, and by /proc where
pidfds are missing), a pid reused by a later run is watched again, and the
checker finds an overlap that the watcher's times prove.

  python3 chaos_check_test.py        (run by ctest as unit.chaos_check)
"""
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chaos_check  # noqa: E402


def now_ms():
    return int(time.time() * 1000)


class Watcher:
    """chaos_check.watch in a thread of this process, on files in DIR."""

    def __init__(self, d):
        self.log, self.gone, self.stop = (os.path.join(d, n) for n in ("log", "gone", "stop"))
        open(self.log, "w").close()
        self.t = threading.Thread(target=chaos_check.watch, args=(self.log, self.gone, self.stop))
        self.t.start()

    def start_line(self, pid, job="j", item=0):
        with open(self.log, "a") as f:
            f.write(f"START {job} {item} inst {pid} {pid} {now_ms()} 0 1\n")

    def finish(self):
        open(self.stop, "w").close()
        self.t.join(10)
        gone = {}
        if os.path.exists(self.gone):
            for p in chaos_check.parse(self.gone):
                gone.setdefault(int(p[1]), []).append(int(p[2]))
        return gone


def wait_for(pred, s=5.0):
    end = time.time() + s
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.01)
    return False


def same_pid_again(pid):
    """A new process with the pid of one that ended (the kernel's next pid
    set by ns_last_pid, as root; another fork may take it, so a few tries)."""
    for _ in range(20):
        try:
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid - 1))
        except OSError as e:
            raise unittest.SkipTest(f"cannot choose the next pid: {e}")
        p = subprocess.Popen(["sleep", "30"])
        if p.pid == pid:
            return p
        p.kill()
        p.wait()
    raise AssertionError(f"pid {pid} not given again in 20 tries")


class WatchTest(unittest.TestCase):
    def watch_ends(self, no_pidfd):
        saved = getattr(os, "pidfd_open", None)
        if no_pidfd and saved is not None:
            del os.pidfd_open
        try:
            with tempfile.TemporaryDirectory() as d:
                w = Watcher(d)
                procs = [subprocess.Popen(["sleep", "30"]) for _ in range(5)]
                for p in procs:
                    w.start_line(p.pid)
                w.start_line(2**22 + 12345)  # no such pid: gone at once
                time.sleep(0.3)  # every START line read
                killed_at = {}
                for p in procs:
                    p.kill()
                    killed_at[p.pid] = now_ms()
                    time.sleep(0.1)
                # Reaped only now: until then each is a zombie, which counts
                # as gone at its kill.
                time.sleep(0.2)
                for p in procs:
                    p.wait()
                # The same pid again (a later run of another item): watched
                # again, not taken for the run that ended.
                again = same_pid_again(procs[0].pid)
                self.assertTrue(wait_for(lambda: os.path.exists(w.gone)))
                w.start_line(again.pid, item=1)
                time.sleep(0.3)
                again.kill()
                again_at = now_ms()
                again.wait()
                time.sleep(0.3)
                gone = w.finish()
            self.assertIn(2**22 + 12345, gone)
            for pid, t in killed_at.items():
                self.assertIn(pid, gone, f"pid {pid} never reported gone")
                late = gone[pid][0] - t
                self.assertTrue(0 <= late + 5 and late < 150,
                                f"pid {pid} reported {late} ms after its kill")
            self.assertEqual(again.pid, procs[0].pid)
            self.assertTrue(any(abs(t - again_at) < 150 for t in gone[again.pid]),
                            f"pid {again.pid} ended again at {again_at}, reported {gone[again.pid]}")
        finally:
            if no_pidfd and saved is not None:
                os.pidfd_open = saved

    def test_by_pidfd(self):
        if not hasattr(os, "pidfd_open"):
            self.skipTest("no os.pidfd_open")
        self.watch_ends(no_pidfd=False)

    def test_by_proc(self):
        self.watch_ends(no_pidfd=True)


class CheckTest(unittest.TestCase):
    def run_check(self, lines, gone):
        with tempfile.TemporaryDirectory() as d:
            paths = [os.path.join(d, n) for n in ("log", "gone", "faults")]
            for path, text in zip(paths, (lines, gone, "")):
                with open(path, "w") as f:
                    f.write(text)
            return subprocess.run(
                [sys.executable, os.path.join(HERE, "chaos_check.py"), "check", *paths,
                 "--from", "10000", "--to", "20000", "--period", "10", "--items", "1",
                 "--session-ms", "3000"], capture_output=True, text=True)

    # Two runs of item 0 on two instances; the first is killed without a
    # word, so only the watcher's GONE time ends it.
    LOG = ("START j 0 a 4000001 4000001 10100 1 3\n"
           "START j 0 b 4000002 4000002 12000 2 3\n"
           "END j 0 b 4000002 4000002 15000\n")

    def test_overlap_found(self):
        r = self.run_check(self.LOG, "GONE 4000001 13000\n")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("overlap: j item 0", r.stdout)
        self.assertIn("1000 ms at once", r.stdout)

    def test_no_overlap(self):
        r = self.run_check(self.LOG, "GONE 4000001 11900\n")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("overlaps 0;", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
