"""Record the wall time of `make test` in build/bench/make_test_wall_s.json, or of the
headline `make sim` in build/bench/make_sim_wall_s.json (both read by `make bench`).
Called by the Makefile: ``test_wall.py START_EPOCH_S EXIT_CODE [test|sim]``."""

import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv):
    if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] not in ("test", "sim")):
        sys.exit("usage: test_wall.py START_EPOCH_S EXIT_CODE [test|sim]")
    start, rc = float(argv[0]), int(argv[1])
    what = argv[2] if len(argv) == 3 else "test"
    wall = time.time() - start
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    out = ROOT / "build" / "bench" / f"make_{what}_wall_s.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        f"make_{what}_wall_s": round(wall, 1), "passed": rc == 0, "commit": commit,
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }, indent=1) + "\n")
    print(f"make {what}: {wall:.0f} s wall ({'passed' if rc == 0 else 'FAILED'}), "
          f"recorded in {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
