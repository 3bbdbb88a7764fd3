"""How far a knob reaches: the files of the code that name the requester's miss queue
(``miss_queue``), the worked example of docs/architecture.md "A design point", and the
files that name each knob of :data:`REACH`. The files that run a point take its fields
from spec.design_point.RdmaPoint (tb/rdma/point_params.py,
pymodel/rdma/point_fields.py, the model's ``Config`` by field name), so the counts may
only fall; a file that starts naming a knob again (a copied knob list, a per-knob
keyword or row key, plumbing prose) fails here."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: The folders the docs' grep reads (``grep -rlw miss_queue rtl pymodel analysis tb scripts
#: spec --include=*.py``).
FOLDERS = ("rtl", "pymodel", "analysis", "tb", "scripts", "spec")
#: The count docs/architecture.md states; at most this many files name the knob.
MOST = 7
#: Files that run a point: each takes the knob from the point's fields, never by name.
POINT_RUNNERS = ("tb/rdma/headline.py", "tb/rdma/point_params.py", "tb/rdma/cocotb_rdma.py",
                 "scripts/sim_point.py", "analysis/points.py", "pymodel/rdma/point_fields.py")


def _naming(knob):
    word = re.compile(rf"\b{knob}\b")
    return sorted(str(p.relative_to(ROOT)) for folder in FOLDERS
                  for p in (ROOT / folder).rglob("*.py") if word.search(p.read_text()))


def test_miss_queue_reach_at_most_the_docs_count():
    files = _naming("miss_queue")
    assert files, "the knob is gone: update the worked example of docs/architecture.md"
    assert len(files) <= MOST, files
    assert not set(POINT_RUNNERS) & set(files), set(POINT_RUNNERS) & set(files)


def test_docs_state_the_count():
    """The figure in docs/architecture.md is the grep's now (it moves with the code)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    stated = re.search(r"(\d+) files\s+\(`grep -rlw miss_queue", text)
    assert stated, "docs/architecture.md no longer states the miss queue's reach"
    assert int(stated.group(1)) == len(_naming("miss_queue"))


#: Knobs of the RDMA point and the most product files that may name each (the text,
#: as ``grep -rl <knob> rtl pymodel tb scripts spec analysis --include=*.py`` counts):
#: the point's field, the spec that defines and checks it, the RTL block and its twin
#: that implement it; for the ways also the model's configuration and the load point's
#: field list (analysis/load/rdma_knobs.py), for the MR cache the
#: responder and its twin that build its block (the blocks between take the context
#: cache's and the MR table's shapes, spec.rdma_engine.ContextCacheShape and
#: spec.rdma_responder.MrTableShape, as one value each).
REACH = {"qpc_bytes": 6, "cache_ways": 6, "mr_cache": 6}


def _naming_text(knob):
    return sorted(str(p.relative_to(ROOT)) for folder in FOLDERS
                  for p in (ROOT / folder).rglob("*.py") if knob in p.read_text())


@pytest.mark.parametrize("knob", sorted(REACH))
def test_knob_reach(knob):
    files = _naming_text(knob)
    assert "spec/design_point/rdma.py" in files, "the count reads the point's own field"
    assert len(files) <= REACH[knob], files
