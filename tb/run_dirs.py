"""The folder of each co-simulation run inside its build folder (:func:`run_dir_name`)."""

import hashlib
import re

#: Longest run-folder name: a longer test id keeps its first characters and gains a digest
#: of the whole id, so that two ids never share a folder however long they are.
RUN_DIR_CHARS = 80


def run_dir_name(test_id):
    """The folder name of the run ``test_id``: the id with every character outside
    ``[A-Za-z0-9_.-]`` replaced by ``_``; an id whose name would be longer than
    :data:`RUN_DIR_CHARS` keeps its first characters and ends in ``-`` and 12 hex digits
    of the SHA-1 of the whole id (distinct ids give distinct folders)."""
    if not isinstance(test_id, str) or not test_id:
        raise ValueError(f"test_id must be a non-empty string, not {test_id!r}")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", test_id)
    if len(name) <= RUN_DIR_CHARS and name == test_id:
        return name
    digest = hashlib.sha1(test_id.encode()).hexdigest()[:12]
    return f"{name[:RUN_DIR_CHARS - 13]}-{digest}"
