"""shoal: a client of shoal nodes, with the same keys, defaults and errors as shoalctl and libshoal.

    from shoal import Client
    with Client("tcp://127.0.0.1:7400") as node:
        node.claim_create("acme/web", 64 << 20, claim_id="web-1")
        node.move("web-1", "n2", progress=print)
        for event in node.watch("claims,moves"):
            print(event.seq, event.kind, event.what, event.claim_id)
"""
from . import shoal_pb2 as messages
from .client import (Client, ObjectOpen, DEFAULT_ENDPOINT, DEFAULT_CLUSTER_KEY, DEFAULT_TIMEOUT_MS, default_cert, compare, op_put,
                     op_get, op_delete)
from .errors import (ShoalError, RefusedError, UnreachableError, TimeoutError, BadReplyError, StatusError,
                     BadRequest, Unauthorized, Forbidden, NotFound, Conflict, TooManyRequests, InternalError,
                     Unavailable, InsufficientStorage)

__all__ = [
    "Client", "ObjectOpen", "messages", "default_cert", "compare", "op_put", "op_get", "op_delete", "DEFAULT_ENDPOINT", "DEFAULT_CLUSTER_KEY", "DEFAULT_TIMEOUT_MS",
    "ShoalError", "RefusedError", "UnreachableError", "TimeoutError", "BadReplyError", "StatusError",
    "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict", "TooManyRequests", "InternalError",
    "Unavailable", "InsufficientStorage",
]
