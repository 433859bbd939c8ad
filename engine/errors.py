"""One error hierarchy for the whole project; every surface maps it to its own idiom."""

from __future__ import annotations


class LearningError(Exception):
    """Base class of every error the learning layer raises on purpose."""


class InvalidInput(LearningError, ValueError):
    """Input that cannot be accepted; the message names the offending field or value."""


class InvalidArmId(InvalidInput):
    """An arm id that is not `type:category:name` with a known type."""


class InvalidConfig(InvalidInput):
    """A configuration value out of range or of the wrong kind; `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message


class NotFound(LearningError, LookupError):
    """A named thing (arm, learner, trace) does not exist."""


class Ambiguous(InvalidInput):
    """A label matched several arms; `candidates` lists them and nothing was changed."""

    def __init__(self, message: str, candidates: tuple[str, ...]) -> None:
        super().__init__(message)
        self.candidates = candidates


class Forbidden(LearningError):
    """The actor may not run this command."""


class Conflict(LearningError):
    """The request clashes with the current state (nothing to undo, already done...)."""


class Unavailable(LearningError):
    """Storage or another dependency is unreachable right now; retrying later may work."""


class RateLimited(LearningError):
    """The actor ran more commands than the rate limit allows; `retry_after` in seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after
