"""Traces: the messages of one decode step (or one KV transfer) and their dependencies.

A :class:`Trace` is a list of *phases* and a table of *message rows*.

Phase
    One communication step every GPU of the deployment takes part in (a TP all-reduce,
    its reduce-scatter or all-gather half, an EP dispatch or combine, a KV transfer).
    ``deps`` lists the phases it waits for: a phase starts when every phase in ``deps`` is
    done on every GPU (and the compute between them, which the trace does not hold; see
    :mod:`analysis.workloads.roofline`). ``qps`` is how many RDMA queue pairs each GPU
    uses for the phase's traffic, ``peers`` how many GPUs it sends to.
Message row
    ``src`` and ``dst`` (GPU numbers, 0-based), ``bytes`` (payload of one message),
    ``count`` (identical messages the row stands for: same ends, size and phase),
    ``phase`` (index into the phase list) and ``kind``: ``"data"`` or ``"flag"`` (a
    small completion flag or counter that the receiver polls; within a phase a GPU
    sends its flags after its data).
Switch
    A trace with ``switch`` set has one more endpoint, numbered ``gpus``: a switch that
    reduces and multicasts (in-switch reduction, NVLS-style). A row to it is data a GPU
    sends to the switch; a row from it is a result the switch delivers to a GPU. It
    sends or receives nothing of its own accord and is not a GPU: the phase's time is
    its GPUs' (:mod:`analysis.workloads.timing`).

Rows are kept as numpy int64 columns, sorted by (phase, src, kind, dst), so a decode
step of a large expert-parallel deployment (millions of messages) stays a few hundred
thousand rows. :meth:`Trace.records` and :meth:`Trace.to_json` give the replay format.

Replay format (``Trace.to_dict`` / ``to_json``; :func:`trace_from_dict` reads it back)::

    {"format": "scaleup-vs-rdma/trace", "version": 1, "cycle_ns": 1,
     "kind": "decode_step" | "kv_transfer", "model": "llama-3-70b",
     "deployment": {...}, "gpus": 8, "switch": false,
     "phases": [{"id": 0, "name": "L0.attn.ar", "op": "tp_allreduce", "layer": 0,
                 "deps": [], "qps": 7, "peers": 7}, ...],
     "messages": [{"id": 0, "src": 0, "dst": 1, "bytes": 16384, "count": 1,
                   "phase": 0, "layer": 0, "kind": "data", "deps": []}, ...]}

``deps`` of a message is its phase's ``deps`` (phase ids). With ``expand=True`` every
row becomes ``count`` messages of ``count`` 1 (ids consecutive): the form a message-by-
message replay (an RTL multi-node top) consumes. ``layer`` is -1 for a phase that
belongs to no layer. Sizes are bytes; times elsewhere are cycles of 1 ns.
"""

import json
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["Phase", "Trace", "TraceBuilder", "trace_from_dict", "KINDS", "FORMAT"]

FORMAT = "scaleup-vs-rdma/trace"
#: Row kinds, by their code in the ``kind`` column.
KINDS = ("data", "flag")
_COLUMNS = ("src", "dst", "bytes", "count", "phase", "kind")


@dataclass(frozen=True)
class Phase:
    """One communication phase (see the module doc)."""

    id: int
    name: str
    op: str
    layer: int
    deps: tuple
    qps: int
    peers: int


@dataclass
class Trace:
    """Phases and message rows of one trace (see the module doc).

    ``columns`` maps each of ``src, dst, bytes, count, phase, kind`` to an int64 array;
    ``deployment`` is a plain dict of the parameters the trace was generated for;
    ``switch``: endpoint ``gpus`` is a reducing switch (module doc).
    """

    kind: str
    model: str
    deployment: dict
    gpus: int
    phases: list
    columns: dict
    switch: bool = False

    def __len__(self):
        return len(self.columns["src"])

    @property
    def messages(self):
        """Number of messages (rows weighted by ``count``)."""
        return int(self.columns["count"].sum())

    def total_bytes(self, kind=None):
        """Payload bytes of all messages (of one kind, ``"data"`` or ``"flag"``)."""
        c = self.columns
        w = c["count"] * c["bytes"]
        if kind is not None:
            w = w[c["kind"] == KINDS.index(kind)]
        return int(w.sum())

    def count(self, kind=None, phase=None, src=None):
        """Messages of a kind, in a phase (id or name) and from a GPU; ``None`` = any."""
        return int(self.columns["count"][self._mask(kind, phase, src)].sum())

    def sizes(self, kind=None, phase=None, src=None):
        """``{bytes: messages}`` over the rows that match (as :meth:`count`)."""
        m = self._mask(kind, phase, src)
        b, c = self.columns["bytes"][m], self.columns["count"][m]
        out = {}
        for size, n in zip(b.tolist(), c.tolist(), strict=True):
            out[size] = out.get(size, 0) + n
        return out

    def phase_id(self, name):
        """The id of the phase called ``name`` (``ValueError`` if there is none)."""
        for p in self.phases:
            if p.name == name:
                return p.id
        raise ValueError(f"no phase named {name!r} in this trace")

    def _mask(self, kind, phase, src):
        c = self.columns
        m = np.ones(len(self), dtype=bool)
        if kind is not None:
            m &= c["kind"] == KINDS.index(kind)
        if phase is not None:
            m &= c["phase"] == (self.phase_id(phase) if isinstance(phase, str) else phase)
        if src is not None:
            m &= c["src"] == src
        return m

    def records(self, expand=False, limit=None):
        """The message rows as a list of dicts (replay format, module doc).

        ``expand=True`` emits each row ``count`` times with ``count`` 1. ``limit`` caps
        the number of dicts: ``ValueError`` if the trace has more (a guard against
        expanding a large trace by accident).
        """
        n = self.messages if expand else len(self)
        if limit is not None and n > limit:
            raise ValueError(f"the trace has {n} messages{'' if expand else ' rows'}, "
                             f"more than limit={limit}")
        c = {k: v.tolist() for k, v in self.columns.items()}
        out = []
        for i in range(len(self)):
            p = self.phases[c["phase"][i]]
            base = {"src": c["src"][i], "dst": c["dst"][i], "bytes": c["bytes"][i],
                    "count": c["count"][i], "phase": p.id, "layer": p.layer,
                    "kind": KINDS[c["kind"][i]], "deps": list(p.deps)}
            for _ in range(c["count"][i] if expand else 1):
                out.append(dict(base, id=len(out), count=1 if expand else base["count"]))
        return out

    def to_dict(self, expand=False, limit=None):
        """The whole trace in the replay format (module doc)."""
        return {"format": FORMAT, "version": 1, "cycle_ns": 1, "kind": self.kind,
                "model": self.model, "deployment": dict(self.deployment), "gpus": self.gpus,
                "switch": self.switch,
                "phases": [dict(asdict(p), deps=list(p.deps)) for p in self.phases],
                "messages": self.records(expand=expand, limit=limit)}

    def to_json(self, path=None, expand=False, limit=None):
        """:meth:`to_dict` as JSON text; also written to ``path`` when given."""
        text = json.dumps(self.to_dict(expand=expand, limit=limit), indent=1)
        if path is not None:
            with open(path, "w") as f:
                f.write(text + "\n")
        return text


def trace_from_dict(doc):
    """A :class:`Trace` from the replay format (expanded or not). ``ValueError`` if
    ``doc`` is not that format or a message names a phase it does not list."""
    if doc.get("format") != FORMAT or doc.get("version") != 1:
        raise ValueError(f"not a {FORMAT} version 1 document")
    phases = [Phase(p["id"], p["name"], p["op"], p["layer"], tuple(p["deps"]), p["qps"],
                    p["peers"]) for p in doc["phases"]]
    if [p.id for p in phases] != list(range(len(phases))):
        raise ValueError("phase ids must be 0, 1, 2, ... in order")
    b = TraceBuilder(doc["kind"], doc["model"], doc["deployment"], doc["gpus"],
                     switch=bool(doc.get("switch", False)))
    b.phases = phases
    for m in doc["messages"]:
        if not 0 <= m["phase"] < len(phases):
            raise ValueError(f"message {m.get('id')} names phase {m['phase']}, not listed")
        b.add(m["phase"], [m["src"]], [m["dst"]], m["bytes"], m["count"], m["kind"])
    return b.build()


class TraceBuilder:
    """Collects phases and rows, then :meth:`build` sorts and merges them into a
    :class:`Trace` (rows with the same phase, ends, size and kind are merged)."""

    def __init__(self, kind, model, deployment, gpus, switch=False):
        self.kind, self.model, self.deployment, self.gpus = kind, model, deployment, gpus
        self.switch = switch
        self.phases = []
        self._rows = []

    def phase(self, name, op, layer, deps, qps, peers):
        """Add a phase; returns its id. ``deps`` are earlier phase ids."""
        deps = tuple(int(d) for d in deps)
        if any(not 0 <= d < len(self.phases) for d in deps):
            raise ValueError(f"phase {name!r} waits for a phase not yet added: {deps}")
        self.phases.append(Phase(len(self.phases), name, op, layer, deps, int(qps),
                                 int(peers)))
        return len(self.phases) - 1

    def add(self, phase, src, dst, nbytes, count, kind):
        """Add rows: ``src``, ``dst``, ``nbytes`` and ``count`` are scalars or arrays of
        one length (``count`` 0 rows are dropped); ``kind`` is ``"data"`` or ``"flag"``.
        Raises ``ValueError`` for a size or count below 1 where a message is sent, and for
        a message from a GPU to itself."""
        src = np.atleast_1d(np.asarray(src, dtype=np.int64))
        n = len(src)
        cols = [src] + [np.broadcast_to(np.asarray(v, dtype=np.int64), (n,))
                        for v in (dst, nbytes, count)]
        keep = cols[3] > 0
        cols = [c[keep] for c in cols]
        if np.any(cols[2] < 1):
            raise ValueError("message bytes must be at least 1")
        if np.any(cols[3] < 0):
            raise ValueError("message count must not be negative")
        if np.any(cols[0] == cols[1]):
            raise ValueError("a message from a GPU to itself is not network traffic")
        ends = self.gpus + (1 if self.switch else 0)
        if np.any((cols[0] < 0) | (cols[0] >= ends) | (cols[1] < 0) | (cols[1] >= ends)):
            raise ValueError(f"GPU numbers must be 0 to {self.gpus - 1}"
                             + (f" (the switch {self.gpus})" if self.switch else ""))
        k = len(cols[0])
        self._rows.append((cols[0], cols[1], cols[2], cols[3],
                           np.full(k, phase, dtype=np.int64),
                           np.full(k, KINDS.index(kind), dtype=np.int64)))

    def build(self):
        if self._rows:
            cols = [np.concatenate(parts) for parts in zip(*self._rows, strict=True)]
        else:
            cols = [np.zeros(0, dtype=np.int64) for _ in _COLUMNS]
        src, dst, nbytes, count, phase, kind = cols
        g = max(self.gpus + (1 if self.switch else 0), 1)
        where = (phase * 2 * g + src * 2 + kind) * g + dst     # (phase, src, kind, dst)
        order = np.lexsort((nbytes, where))
        src, dst, nbytes, count, phase, kind, where = (a[order] for a in (*cols, where))
        # Merge rows that differ only in count.
        if len(src):
            new = np.r_[True, (where[1:] != where[:-1]) | (nbytes[1:] != nbytes[:-1])]
            starts = np.flatnonzero(new)
            count = np.add.reduceat(count, starts)
            src, dst, nbytes, phase, kind = (a[starts] for a in (src, dst, nbytes, phase,
                                                                  kind))
        columns = dict(zip(_COLUMNS, (src, dst, nbytes, count, phase, kind), strict=True))
        return Trace(self.kind, self.model, self.deployment, self.gpus, list(self.phases),
                     columns, self.switch)
