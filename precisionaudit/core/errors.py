"""Errors that end a command with one clear line and exit code 2."""


class UsageError(Exception):
    """Bad input: a file, flag, plan or model the command cannot work with (exit 2)."""


class CaptureError(UsageError):
    """A model file that cannot be loaded or whose forward cannot be captured."""
