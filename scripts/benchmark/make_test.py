"""The wall time of ``make test``: the record the Makefile leaves, or a timed run."""

import datetime
import json
import math
import subprocess
import time
from pathlib import Path

from . import MAKE_TEST_RECORD, ROOT
from .output import write_report

__all__ = ["read_make_test", "run_make_test", "git_head"]


def read_make_test(path=MAKE_TEST_RECORD, key="make_test_wall_s"):
    """The record `make test` (or, with ``key="make_sim_wall_s"``, the headline
    `make sim`) leaves in ``path`` (a dict), or ``None``."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get(key), (int, float)):
        return None
    return record


def run_make_test(command=("make", "test"), record_path=MAKE_TEST_RECORD):
    """Run ``command`` (``make test``) in the repository, timed; return its record.

    The Makefile records the wall time of ``make test`` in ``record_path`` itself; when
    that record is missing or older than this run (a Makefile that does not record), the
    wall time measured here is written there in the same format.
    """
    start = time.time()
    print(f"running `{' '.join(command)}` (this takes minutes) ...", flush=True)
    rc = subprocess.run(list(command), cwd=ROOT).returncode
    wall = time.time() - start
    if rc:
        print(f"warning: `{' '.join(command)}` exited with {rc}; its wall time is kept",
              flush=True)
    record = read_make_test(record_path)
    if record is None or _finished_before(record, start):
        record = {"make_test_wall_s": round(wall, 1), "passed": rc == 0,
                  "commit": git_head(),
                  "finished": datetime.datetime.now(datetime.UTC).isoformat(
                      timespec="seconds")}
        write_report(record, record_path)
    return record


def _finished_before(record, epoch):
    try:
        finished = datetime.datetime.fromisoformat(record["finished"])
    except (KeyError, TypeError, ValueError):
        return True
    if finished.tzinfo is None:
        finished = finished.replace(tzinfo=datetime.UTC)
    return finished.timestamp() < math.floor(epoch)     # records keep whole seconds


def git_head(root=ROOT):
    """The commit checked out in ``root``, read from ``.git`` without running git, or
    ``None``."""
    try:
        git = root / ".git"
        if git.is_file():                                  # a worktree: "gitdir: <path>"
            git = (root / git.read_text().split(":", 1)[1].strip()).resolve()
        common = git
        if (git / "commondir").is_file():
            common = (git / (git / "commondir").read_text().strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head or None
        ref = head[4:].strip()
        for base in (git, common):
            if (base / ref).is_file():
                return (base / ref).read_text().strip()
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    except (OSError, IndexError):
        pass
    return None

