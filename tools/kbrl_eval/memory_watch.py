"""A limit on the resident memory of a candidate's process and the processes it started in its
session: a thread in the harness polls /proc and kills them all past the limit
(eval.memory_limit_gb)."""

import os
import signal
import threading

from .zygote import processes_of


def _rss_bytes(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


class MemoryWatch:
    """Kills a candidate's process when the resident memory of its session (the process and its
    children there) passes a limit. A thread polls /proc: an address-space limit would break
    CUDA (its context reserves far more virtual memory than it uses), and cgroups are not
    available everywhere. A child that leaves the session is caught by the zygote's reap, not
    here."""

    POLL_S = 0.05

    def __init__(self, pid, limit_bytes):
        self.pid = pid
        self.limit = limit_bytes
        self.peak = 0
        self.tripped = 0  # the session's RSS when it was killed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kbrl-memory-watch", daemon=True)
        self._thread.start()

    def _run(self):
        members, polls = [self.pid], 0
        while not self._stop.wait(self.POLL_S):
            if polls % 10 == 0:  # the session's members every 0.5 s, their memory every poll
                members = processes_of(self.pid)
                if self.pid not in members:
                    return  # gone
            polls += 1
            rss = sum(_rss_bytes(p) for p in members)
            self.peak = max(self.peak, rss)
            if rss > self.limit:
                self.tripped = rss
                for p in members:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass
                return

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=1.0)
