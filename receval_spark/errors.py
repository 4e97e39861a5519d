"""Named errors that the command line maps to exit status 2 (bad configuration or bad input),
and the one line it prints for any other exception."""


class UserError(Exception):
    """A problem the user can fix; the message names what is wrong and how to fix it."""


class ConfigError(UserError):
    """The configuration is invalid: an unknown or mistyped key, a missing path."""


class InputError(UserError):
    """An input table is invalid: a missing column, nulls, NaN scores, an empty split."""


class SetupError(Exception):
    """The machine cannot run the job (e.g. no Java); exit status 1 with this message."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message. For a Py4J error, whose own first line only
    names the failed call, the Java exception's, followed by its root cause's when that differs."""
    java = getattr(exc, "java_exception", None)
    try:
        if java is None:
            return _first(str(exc)) or type(exc).__name__
        root = java
        for _ in range(20):  # a cause chain is short; the bound guards against a cycle
            if root.getCause() is None:
                break
            root = root.getCause()
        text, cause = _first(java.toString()), _first(root.toString())
        return text if cause in text else f"{text} (cause: {cause})"
    except Exception:  # the JVM may be gone; the type still says something
        return type(exc).__name__


def _first(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
