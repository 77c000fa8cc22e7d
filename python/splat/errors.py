"""splat.errors — the one exception type of the Python package.

Every failure of the C library surfaces as :class:`splat.Error` carrying the status
name (``"SPLAT_ERR_PARSE"``, ``"SPLAT_ERR_NO_DEVICE"``, ...) and the library's detailed
message (``splat_last_error``). Problems the Python layer detects itself (a 3-d array,
an unsupported dtype, a missing library) use the same type and the same status names.
"""

from __future__ import annotations

# The C status table (include/splat.h), code -> name. Kept here and only here.
STATUS_NAMES = {
    0: "SPLAT_OK",
    1: "SPLAT_ERR_INVALID_ARGUMENT",
    2: "SPLAT_ERR_PARSE",
    3: "SPLAT_ERR_UNSUPPORTED",
    4: "SPLAT_ERR_OUT_OF_MEMORY",
    5: "SPLAT_ERR_NO_DEVICE",
    6: "SPLAT_ERR_CUDA",
    7: "SPLAT_ERR_COMPILE",
    8: "SPLAT_ERR_IO",
    9: "SPLAT_ERR_INTERNAL",
}
STATUS_CODES = {name: code for code, name in STATUS_NAMES.items()}


class Error(RuntimeError):
    """A splat failure.

    Attributes:
        status: the status name, e.g. ``"SPLAT_ERR_INVALID_ARGUMENT"``.
        code: the numeric status (``-1`` for a failure without a C status, such as a
            library that cannot be found).
        message: the detailed sentence naming the argument, its value and the rule.
    """

    def __init__(self, status: str, message: str) -> None:
        self.status = status
        self.code = STATUS_CODES.get(status, -1)
        self.message = message
        super().__init__(f"{status}: {message}")


def invalid(message: str) -> Error:
    """An ``SPLAT_ERR_INVALID_ARGUMENT`` raised by the Python layer."""
    return Error("SPLAT_ERR_INVALID_ARGUMENT", message)
