"""Run a Wireshark Lua dissector of scripts/wireshark/ outside Wireshark, on a plain Lua
interpreter and the stand-in API of tests/lua/wireshark_mock.lua, for tests."""

import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["lua_interpreter", "dissect", "ROOT"]

ROOT = Path(__file__).resolve().parent.parent
_MOCK = ROOT / "tests" / "lua" / "wireshark_mock.lua"


def lua_interpreter():
    """The path of a Lua 5.3+ interpreter (the mock uses integer bit operators), or
    None."""
    for name in ("lua5.4", "lua5.3", "lua"):
        path = shutil.which(name)
        if path:
            return path
    return None


def dissect(script, encap, packets):
    """Dissect ``packets`` (bytes each) with the dissector ``script`` registered on the
    encapsulation ``encap`` (``"USER0"``...): a list with one dict per packet, field
    abbreviation -> value (int, or hex string for byte fields; ``used``: the bytes the
    dissector said it consumed, ``protocol``: the protocol column)."""
    lua = lua_interpreter()
    if lua is None:
        raise RuntimeError("no Lua interpreter (lua5.4, lua5.3 or lua) on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        hexes = Path(tmp) / "packets.hex"
        hexes.write_text("".join(p.hex() + "\n" for p in packets))
        out = subprocess.run([lua, str(_MOCK), str(ROOT / script), encap, str(hexes)],
                             capture_output=True, text=True, check=True).stdout
    fields = [{} for _ in packets]
    for line in out.splitlines():
        index, name, value = line.split(" ", 2)
        fields[int(index)][name] = int(value, 16) if value.startswith("0x") else value
    return fields
