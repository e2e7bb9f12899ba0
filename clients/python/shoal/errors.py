"""What can go wrong in a call to a shoal node, as exceptions.

Failures on this side of a reply (the node refused our key at the
handshake, nobody answers at the endpoint, no reply in time, a reply that
does not decode) each have a class; a reply with a status other than 200
raises the class of its status, which names it and carries the node's
message and, with 429 and 503, when a retry may succeed.
"""


class ShoalError(Exception):
    """Every error the client raises."""


class RefusedError(ShoalError):
    """The node refused our key at the handshake, or the handshake broke."""


class UnreachableError(ShoalError):
    """No connection to the endpoint could be made in time."""


class TimeoutError(ShoalError):  # noqa: A001 - the client's own, as libshoal's SHOAL_E_TIMEOUT
    """Connected, but no reply came within the timeout."""


class BadReplyError(ShoalError):
    """A reply came that does not decode."""


class StatusError(ShoalError):
    """The node answered with a status other than 200."""

    status = 0

    def __init__(self, message="", status=None, retry_after_ms=0):
        if status is not None:
            self.status = status
        self.message = message
        self.retry_after_ms = retry_after_ms
        super().__init__("%d %s%s%s" % (self.status, self.__class__.__name__, ": " if message else "", message))


class BadRequest(StatusError):
    status = 400


class Unauthorized(StatusError):
    status = 401


class Forbidden(StatusError):
    status = 403


class NotFound(StatusError):
    status = 404


class Conflict(StatusError):
    status = 409


class TooManyRequests(StatusError):
    status = 429


class InternalError(StatusError):
    status = 500


class Unavailable(StatusError):
    status = 503


class InsufficientStorage(StatusError):
    status = 507


STATUS_ERRORS = {cls.status: cls for cls in (BadRequest, Unauthorized, Forbidden, NotFound, Conflict,
                                             TooManyRequests, InternalError, Unavailable, InsufficientStorage)}


def status_error(status, message, retry_after_ms=0):
    """The exception for a reply with STATUS."""
    cls = STATUS_ERRORS.get(status, StatusError)
    return cls(message, status=status, retry_after_ms=retry_after_ms)
