"""Run independent points (model rows, co-simulations) in local processes or on a Dask
cluster, and get their results back in the order of the points.

:func:`make_executor` ``(jobs, scheduler)``:

- ``scheduler=None`` (the default): ``jobs`` local processes
  (``concurrent.futures.ProcessPoolExecutor``; ``jobs=1`` runs in this process). No Dask
  import, no network.
- ``scheduler="local"``: a ``dask.distributed.LocalCluster`` of ``jobs`` worker processes
  started here and closed at the end (a laptop, the tests).
- ``scheduler="tcp://host:8786"`` (or any address ``dask.distributed.Client`` takes): the
  workers of that scheduler. Each worker needs this repository at the same path, or on
  its ``PYTHONPATH``, and its own ``.venv``; co-simulations build into ``build/`` of the
  worker's checkout (a shared folder is safe: exports and builds take file locks).
  docs/sweeps.md shows how to start a scheduler and workers by hand or with
  dask-jobqueue on Slurm, PBS, SGE or LSF.

``executor.map(fn, items, progress=None)`` calls ``fn(item)`` for every item and returns
the results in the order of ``items`` (the same list a local run gives); ``progress`` is
called with each result as it arrives. A failure in one item raises it here; with
``errors="return"`` it is an :class:`ItemFailed` in that item's place instead (and is
given to ``progress``), so the other items still finish (a worker that died, a Dask
``KilledWorker``). Use the executor as a context manager (``with make_executor(...) as
ex:``).
"""

import concurrent.futures
import os
from pathlib import Path

__all__ = ["make_executor", "ExecutorError", "ItemFailed", "add_cluster_options",
           "check_cluster_options"]

ROOT = Path(__file__).resolve().parent.parent
#: Seconds to wait for a remote scheduler before giving up.
CONNECT_TIMEOUT_S = 10


class ExecutorError(ValueError):
    """A bad ``--jobs`` or ``--scheduler``: the message names the option."""


class ItemFailed(Exception):
    """``map(..., errors="return")``: the item whose call raised, in its result's place.

    ``item`` is the item, ``error`` the exception it raised (or the executor's, for a
    worker that died)."""

    def __init__(self, item, error):
        super().__init__(f"{type(error).__name__}: {error}")
        self.item, self.error = item, error


def add_cluster_options(ap, what="the jobs"):
    """Add ``--scheduler`` and ``--connect-timeout`` to the argparse parser ``ap``: the
    options of every script that runs its points through :func:`make_executor`."""
    ap.add_argument("--scheduler", default=None,
                    help=f"run {what} on a Dask cluster: 'local' (a LocalCluster of --jobs "
                         "workers) or a scheduler address such as tcp://host:8786 "
                         "(docs/sweeps.md)")
    ap.add_argument("--connect-timeout", type=float, default=CONNECT_TIMEOUT_S,
                    help=f"seconds to wait for --scheduler (default {CONNECT_TIMEOUT_S})")


def check_cluster_options(ap, args):
    """Stop with an argparse error naming the option when ``--connect-timeout`` (added by
    :func:`add_cluster_options`) is not positive."""
    if not args.connect_timeout > 0:
        ap.error(f"--connect-timeout must be positive, not {args.connect_timeout}")


def make_executor(jobs=2, scheduler=None, connect_timeout=CONNECT_TIMEOUT_S):
    """An executor of ``jobs`` local processes, or of the Dask cluster at ``scheduler``
    (``"local"``: a local Dask cluster of ``jobs`` workers; an address: given up after
    ``connect_timeout`` seconds). See the module docstring."""
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ExecutorError(f"--jobs must be an integer of at least 1, not {jobs!r}")
    if scheduler is None:
        return _Local(jobs)
    if not isinstance(scheduler, str) or not scheduler:
        raise ExecutorError(f"--scheduler must be 'local' or a Dask scheduler address "
                            f"such as tcp://host:8786, not {scheduler!r}")
    return _Dask(jobs, scheduler, connect_timeout)


class _Local:
    def __init__(self, jobs):
        self.jobs = jobs
        self.pool = None

    def __enter__(self):
        if self.jobs > 1:
            self.pool = concurrent.futures.ProcessPoolExecutor(max_workers=self.jobs)
        return self

    def __exit__(self, *exc):
        if self.pool is not None:
            self.pool.shutdown()
        return False

    def map(self, fn, items, progress=None, errors="raise"):
        items = _check_errors(list(items), errors)
        if self.pool is None:
            out = []
            for item in items:
                try:
                    out.append(fn(item))
                except Exception as exc:
                    if errors == "raise":
                        raise
                    out.append(ItemFailed(item, exc))
                if progress:
                    progress(out[-1])
            return out
        futures = {self.pool.submit(fn, item): k for k, item in enumerate(items)}
        return _collect(futures, concurrent.futures.as_completed(futures), items,
                        progress, errors)


class _Dask:
    def __init__(self, jobs, scheduler, connect_timeout):
        self.jobs, self.scheduler, self.timeout = jobs, scheduler, connect_timeout
        self.client = self.cluster = None

    def __enter__(self):
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError as exc:        # pragma: no cover - dask is a dependency
            raise ExecutorError(f"--scheduler needs dask[distributed] ({exc})") from exc
        if self.scheduler == "local":
            # The workers are new processes: they find this repository's packages
            # through PYTHONPATH, as `make` sets it.
            path = os.environ.get("PYTHONPATH", "")
            if str(ROOT) not in path.split(os.pathsep):
                os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), path) if p)
            self.cluster = LocalCluster(n_workers=self.jobs, threads_per_worker=1,
                                        processes=True, dashboard_address=None)
            self.client = Client(self.cluster)
        else:
            try:
                self.client = Client(self.scheduler, timeout=self.timeout)
            except (OSError, TimeoutError, ValueError, TypeError) as exc:
                raise ExecutorError(f"--scheduler {self.scheduler}: cannot reach a Dask "
                                    f"scheduler there ({exc})") from exc
        return self

    def __exit__(self, *exc):
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        return False

    def map(self, fn, items, progress=None, errors="raise"):
        from dask.distributed import as_completed

        items = _check_errors(list(items), errors)
        # pure=False: every item runs, even if two are equal (co-simulations write files).
        futures = self.client.map(fn, items, pure=False)
        index = {f.key: k for k, f in enumerate(futures)}
        done = ((f, index[f.key]) for f in as_completed(futures))
        return _collect(None, done, items, progress, errors)


def _check_errors(items, errors):
    if errors not in ("raise", "return"):
        raise ValueError(f"errors must be 'raise' or 'return', not {errors!r}")
    return items


def _collect(futures, completed, items, progress, errors):
    """Results in item order from ``completed`` (futures, or ``(future, index)``)."""
    out = [None] * len(items)
    for entry in completed:
        fut, k = entry if futures is None else (entry, futures[entry])
        try:
            out[k] = fut.result()
        except Exception as exc:
            if errors == "raise":
                raise
            out[k] = ItemFailed(items[k], exc)
        if progress:
            progress(out[k])
    return out
