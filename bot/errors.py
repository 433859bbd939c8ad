"""The one error table: each error class -> the code a reply carries, its HTTP status and the
terminal's exit code. Every surface looks errors up here by class (or by the code a reply
carries), never by reading message text."""

from __future__ import annotations

from dataclasses import dataclass

from learning_bot.engine.errors import (
    Ambiguous,
    Conflict,
    Forbidden,
    InvalidInput,
    LearningError,
    NotFound,
    RateLimited,
    Unavailable,
)


@dataclass(frozen=True, slots=True)
class ErrorKind:
    code: str
    """Machine-readable name, carried by error replies as `data["errorCode"]`."""
    http_status: int
    exit_code: int
    """The terminal's: 2 for a command line that cannot be run as typed, 1 otherwise."""
    public_message: str | None = None
    """Shown instead of the exception's own text (for failures the user cannot act on)."""


INVALID = ErrorKind("invalid_input", 400, 2)
AMBIGUOUS = ErrorKind("ambiguous", 400, 2)
NOT_FOUND = ErrorKind("not_found", 404, 1)
FORBIDDEN = ErrorKind("forbidden", 403, 1)
CONFLICT = ErrorKind("conflict", 409, 1)
RATE_LIMITED = ErrorKind("rate_limited", 429, 1)
UNAVAILABLE = ErrorKind(
    "unavailable", 503, 1, "Storage is unavailable right now; try again shortly."
)
FAILED = ErrorKind("learning_error", 409, 1)
INTERNAL = ErrorKind("internal", 500, 1, "Something went wrong on our side; the error was logged.")

ERROR_TABLE: dict[type[BaseException], ErrorKind] = {
    Ambiguous: AMBIGUOUS,
    InvalidInput: INVALID,
    NotFound: NOT_FOUND,
    Forbidden: FORBIDDEN,
    Conflict: CONFLICT,
    RateLimited: RATE_LIMITED,
    Unavailable: UNAVAILABLE,
    LearningError: FAILED,
}
_BY_CODE = {kind.code: kind for kind in (*ERROR_TABLE.values(), INTERNAL)}


def error_kind(error: BaseException | type[BaseException]) -> ErrorKind:
    """The table's entry for an error (its most specific class listed); INTERNAL otherwise."""
    cls = error if isinstance(error, type) else type(error)
    for base in cls.__mro__:
        kind = ERROR_TABLE.get(base)
        if kind is not None:
            return kind
    return INTERNAL


def kind_of_code(code: str | None) -> ErrorKind:
    """The entry an error reply's code names (INVALID for a usage error without one)."""
    if code is None:
        return INVALID
    return _BY_CODE.get(code, INTERNAL)


def user_message(error: BaseException) -> str:
    """What a person is shown for an error: its own message, or the table's public text."""
    kind = error_kind(error)
    return kind.public_message or str(error)
