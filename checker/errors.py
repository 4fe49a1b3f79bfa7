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


def wrote_and_declined(action: str) -> SpecError:
    """The one error every tier gives for an action that changed its successor ``t`` and then
    returned False: the compiled kernels would otherwise start the next instance from the written
    record, a silently wrong answer, where the interpreted ones refuse."""
    return SpecError(f"action {action} changed the successor but returned False: an action that does not fire "
                     "must leave t as it found it; test its guard before writing t")
