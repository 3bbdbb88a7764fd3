"""`make waves`: open the last waveform (WAVES=1 runs record it) with a saved layout.

Writes a GTKWave save file next to the waveform (clock, reset and the cycle counter of
the top, the signals every run has) and opens GTKWave when a display is available;
otherwise it prints both paths.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAST = ROOT / "build" / "last_waves.txt"


def layout(wave, top):
    prefixes = [f"TOP.{top}.", f"{top}."]
    names = ["clk", "rst", "now"]
    lines = [f'[dumpfile] "{wave}"', f'[savefile] "{wave.with_suffix(".gtkw")}"',
             "[timestart] 0", "@28"]
    for prefix in prefixes:
        lines += [prefix + n for n in names[:2]]
    lines.append("@24")
    for prefix in prefixes:
        lines.append(prefix + "now[31:0]")
    return "\n".join(lines) + "\n"


def main():
    if not LAST.exists():
        print("no waveform yet: run a simulation with WAVES=1 first, e.g.\n"
              "  make sim WAVES=1      (or)  WAVES=1 make test", file=sys.stderr)
        return 1
    wave = Path(LAST.read_text().strip())
    if not wave.exists():
        print(f"the last waveform {wave} is gone (make clean?); rerun with WAVES=1",
              file=sys.stderr)
        return 1
    top = wave.parent.parent.name.rsplit("-", 1)[0]
    save = wave.with_suffix(".gtkw")
    save.write_text(layout(wave, top))
    viewer = shutil.which("gtkwave")
    if viewer and os.environ.get("DISPLAY"):
        subprocess.Popen([viewer, str(wave), str(save)])
        print(f"opened {wave}")
    else:
        print(f"waveform: {wave}\nlayout:   {save}")
        if not viewer:
            print("(install GTKWave to view it: sudo apt-get install gtkwave)")
        else:
            print("(no display: copy both files to a machine with one)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
