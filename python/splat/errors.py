"""splat.errors — the one exception type of the Python package, and the checks of
scalar arguments (integers, flags) that raise it.

Every failure of the C library surfaces as :class:`splat.Error` carrying the status
name (``"SPLAT_ERR_PARSE"``, ``"SPLAT_ERR_NO_DEVICE"``, ...) and the library's detailed
message (``splat_last_error``). Problems the Python layer detects itself (a 3-d array,
an unsupported dtype, a missing library) use the same type and the same status names.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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


def integer(value: Any, what: str) -> int:
    """An integer argument (an int or a numpy integer) as a Python int. A bool is refused:
    True is no count, though Python and ctypes would take it as 1."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise invalid(f"{what}={value!r} must be an integer")
    return int(value)


def c_integer(value: Any, what: str, bits: int) -> int:
    """An integer argument that fits the library's signed ``bits``-bit C integer (ctypes
    would wrap a value past it without a word: 2**64 + 4 passes as 4)."""
    value = integer(value, what)
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise invalid(f"{what}={value} does not fit the {bits}-bit C integer the library takes")
    return value


def positive_int(value: Any, what: str) -> int:
    """A count (a sequence length): an integer in 1..2^63-1."""
    value = integer(value, what)
    if value < 1:
        raise invalid(f"{what}={value} must be >= 1")
    if value >= 2**63:  # ctypes would wrap it silently
        raise invalid(f"{what}={value} must be below 2^63")
    return value


def flag(value: Any, what: str) -> bool:
    """A yes/no argument: True or False (a numpy bool too). Anything else is refused, not
    read by its truth ("no" and 2 are both true)."""
    if not isinstance(value, (bool, np.bool_)):
        raise invalid(f"{what}={value!r} must be True or False")
    return bool(value)
