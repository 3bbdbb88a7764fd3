"""The parameters of open-loop traffic ("under load"): the traffic patterns, the QP
popularity laws, the latency percentiles the load rows carry, and the checks that give
a bad parameter a clear error.

One definition for the generator (:mod:`analysis.load.traffic`), the load runners and the
report. Units: cycles of 1 ns (SPEC.md, Units).

# Ref: SPEC.md "What every run measures" (latency, completion); the percentile is the
# nearest-rank one (the smallest value with at least p % of the values at or below it).
"""

__all__ = ["PATTERNS", "POPULARITY", "PERCENTILES", "DISTRIBUTION_KEYS", "LOAD_DEFAULTS",
           "check_load", "check_skew", "check_count", "percentile_key"]

#: Who sends to whom. ``pair``: node 0 -> 1. ``incast``: nodes 1 .. n-1 -> node 0.
#: ``all_to_all``: every node -> a uniformly drawn other node, per message.
#: ``permutation``: every node -> one fixed other node (a seeded derangement).
PATTERNS = ("pair", "incast", "all_to_all", "permutation")

#: Which QP a message uses (RDMA). ``round_robin``: QP ``k mod qps`` for the k-th
#: message of a sender; ``uniform``: drawn uniformly; ``zipf``: QP ``i`` with weight
#: ``1 / (i + 1) ** skew``. All draw from the first ``working_set`` QPs (default all).
POPULARITY = ("round_robin", "uniform", "zipf")

#: Percentiles of the load rows: ``latency_p50_cycles`` .. ``latency_p999_cycles`` and
#: ``latency_max_cycles`` (and the same for ``completion``).
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p999", 99.9))

#: The distribution keys of a load row, per measured quantity.
DISTRIBUTION_KEYS = tuple(f"{q}_{name}_cycles" for q in ("latency", "completion")
                          for name in [n for n, _ in PERCENTILES] + ["max"])

#: Defaults of the traffic knobs: offered load (fraction of one sender's saturated
#: message rate), burst (messages that arrive together), QP popularity, Zipf skew
#: (0.99: the YCSB default, Cooper et al., SoCC 2010), working set (None: every QP).
LOAD_DEFAULTS = {"pattern": "pair", "load": 0.5, "burst": 1, "popularity": "round_robin",
                 "skew": 0.99, "working_set": None}


def percentile_key(quantity, name):
    """``"latency_p99_cycles"`` for ``("latency", "p99")``."""
    return f"{quantity}_{name}_cycles"


def check_load(load):
    """``load`` (offered load, a fraction of saturation) must be a number in (0, 1]."""
    if (not isinstance(load, (int, float)) or isinstance(load, bool)
            or not 0 < load <= 1):
        raise ValueError(f"load (offered load, a fraction of the saturated rate) must be "
                         f"above 0 and at most 1 (100 %), not {load!r}")
    return float(load)


def check_skew(skew):
    """The Zipf skew must be a number >= 0 (0 is uniform)."""
    if not isinstance(skew, (int, float)) or isinstance(skew, bool) or skew < 0:
        raise ValueError(f"skew (Zipf exponent) must be a number >= 0, not {skew!r}")
    return float(skew)


def check_count(name, value, low=1, high=1 << 40):
    """An integer count from ``low`` to ``high`` (qps, nodes, burst, messages)."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, not {value!r}")
    return value
