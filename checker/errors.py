"""Exceptions that carry a message meant for the user, not a traceback."""


class KraftcheckError(Exception):
    """Base of every error kraftcheck reports to a user as one clear line."""


class UsageError(KraftcheckError):
    """Bad input from the user: unknown spec, bad parameter, contradictory options (exit 2)."""


class SpecError(KraftcheckError):
    """A spec broke its contract: a value outside its field's domain, a malformed layout."""


class SpecCodeError(SpecError):
    """A spec's function raised when run as Python (the interpreted tier, the reference explorer):
    code numba may compile all the same (the engine then redoes that work compiled)."""
