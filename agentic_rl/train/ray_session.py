"""One Ray session for a sweep or a run with rollout workers: a local Ray sized to this
machine, or a running cluster (``--address auto|HOST:PORT``)."""

from __future__ import annotations

import contextlib
import os

LOCAL_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray's single-machine, loopback mode


@contextlib.contextmanager
def ray_session(address: str | None):
    """``ray.init`` for the sweep or run, ``ray.shutdown`` after (nothing when Ray is already
    running in this process, e.g. inside a sweep trial). Without ``address``: a local Ray in
    its local-only mode, so its services listen on 127.0.0.1 alone (Ray otherwise takes the
    machine's address and listens on every interface)."""
    import ray
    from ray._private import ray_constants

    if ray.is_initialized():
        yield
        return
    saved = (os.environ.get(LOCAL_ONLY), ray_constants.ENABLE_RAY_CLUSTER)
    if address is None:  # read by the processes Ray starts, and by this one
        os.environ[LOCAL_ONLY], ray_constants.ENABLE_RAY_CLUSTER = "0", False
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
        yield
    finally:
        ray.shutdown()
        if saved[0] is None:
            os.environ.pop(LOCAL_ONLY, None)
        else:
            os.environ[LOCAL_ONLY] = saved[0]
        ray_constants.ENABLE_RAY_CLUSTER = saved[1]
