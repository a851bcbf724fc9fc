"""Where a command writes (perfetto's JSON, profile's and timeline's PNG):
the output path is checked, and its directory made, before the trace is
read, so that a run of minutes does not end on a path that cannot be
written.
"""

import os

from .format import TraceError


def prepare_output(path):
    """Creates the output's directory and checks that it is writable, before any work."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise TraceError(path, "is a directory (expected an output file name)")
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as e:
        raise TraceError(path, "cannot create its directory %s: %s" % (parent, e.strerror or e))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise TraceError(path, "cannot write into %s (permission denied)" % parent)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise TraceError(path, "cannot write: permission denied")
    return path
