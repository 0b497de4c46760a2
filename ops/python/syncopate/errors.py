"""SyncopateError: every failure of the package, with the library's status code.

Codes are the gRPC canonical codes the C ABI returns (syncopate/syncopate_ops.h). Errors found in
Python before a call into the library (a bad argument, a library that cannot be loaded) carry the
same codes, so callers test `err.code_name == "INVALID_ARGUMENT"` either way.
"""

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16

# The names syncopate_status_name returns; used where the library is not loaded (or cannot be).
_CODE_NAMES = {
    OK: "OK",
    CANCELLED: "CANCELLED",
    UNKNOWN: "UNKNOWN",
    INVALID_ARGUMENT: "INVALID_ARGUMENT",
    DEADLINE_EXCEEDED: "DEADLINE_EXCEEDED",
    NOT_FOUND: "NOT_FOUND",
    ALREADY_EXISTS: "ALREADY_EXISTS",
    PERMISSION_DENIED: "PERMISSION_DENIED",
    RESOURCE_EXHAUSTED: "RESOURCE_EXHAUSTED",
    FAILED_PRECONDITION: "FAILED_PRECONDITION",
    ABORTED: "ABORTED",
    OUT_OF_RANGE: "OUT_OF_RANGE",
    UNIMPLEMENTED: "UNIMPLEMENTED",
    INTERNAL: "INTERNAL",
    UNAVAILABLE: "UNAVAILABLE",
    DATA_LOSS: "DATA_LOSS",
    UNAUTHENTICATED: "UNAUTHENTICATED",
}


def code_name(code):
    """The canonical name of `code` ("INVALID_ARGUMENT"), without the library."""
    return _CODE_NAMES.get(int(code), "UNKNOWN(%d)" % int(code))


class SyncopateError(Exception):
    """A failed Syncopate call.

    Attributes:
      code: the status code (an int, e.g. 3).
      code_name: its name (e.g. "INVALID_ARGUMENT").
      message: what went wrong (the library's syncopate_last_error(), or the Python check's).
    """

    def __init__(self, code, message, code_name_=None):
        self.code = int(code)
        self.code_name = code_name_ if code_name_ else code_name(self.code)
        self.message = message
        super().__init__("%s: %s" % (self.code_name, message))

    def __reduce__(self):  # picklable (multiprocessing passes errors between ranks)
        return (SyncopateError, (self.code, self.message, self.code_name))


def invalid_argument(message):
    return SyncopateError(INVALID_ARGUMENT, message)
