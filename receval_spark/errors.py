"""Named errors that the command line maps to exit status 2 (bad configuration or bad input)."""


class UserError(Exception):
    """A problem the user can fix; the message names what is wrong and how to fix it."""


class ConfigError(UserError):
    """The configuration is invalid: an unknown or mistyped key, a missing path."""


class InputError(UserError):
    """An input table is invalid: a missing column, nulls, NaN scores, an empty split."""


class SetupError(Exception):
    """The machine cannot run the job (e.g. no Java); exit status 1 with this message."""
