"""Exit codes and the one-line error form of the command line.

Every way a command can end is mapped here: bad input is one line ``precisionaudit: error:
...`` and exit 2 (click's own usage errors included, not its three-line form); a bug of ours
is exit 2 too but says "internal error, please report" (its traceback under --debug); a
real Ctrl-C is 130, SIGTERM 143 and SIGHUP 129, as a shell reports them, after cleanup has run; stdout
on a full disk or a closed pipe is one line, not a traceback from the final flush.
"""
from __future__ import annotations

import errno
import functools
import io
import os
import signal
import sys
import traceback

import click

from .errors import UsageError
from .isolation import command_started
from .signals import Terminated, TimeLimitExceeded, handled_signals

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_HANGUP = 130, 143, 129  # 128 + SIGINT, SIGTERM, SIGHUP
#: errors of writing stdout itself (no file name): a full disk, a closed pipe
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EPIPE, errno.EIO, errno.EDQUOT, errno.EFBIG}
DEBUG_KEY = "precisionaudit.debug"


def fail(message: str, debug: bool = False, code: int = EXIT_USAGE):
    if debug:
        traceback.print_exc()
    click.echo(f"precisionaudit: error: {message}", err=True)
    sys.exit(code)


def debug_requested() -> bool:
    """Whether the running command was given --debug (in a forked child too: it inherits the
    parent's click context)."""
    context = click.get_current_context(silent=True)
    return bool(context and context.meta.get(DEBUG_KEY))


def internal_error_line(exc: BaseException, debug: bool) -> str:
    return (f"internal error, please report: {type(exc).__name__}: {exc}"
            + ("" if debug else " (rerun with --debug for the traceback)"))


def guarded(fn):
    """Run a command so that it ends in exactly one of the ways above; adds --debug."""

    @functools.wraps(fn)
    def wrapper(*args, debug=False, **kwargs):
        click.get_current_context().meta[DEBUG_KEY] = debug
        command_started()  # whether the model's code runs in a child process (core.isolation)
        try:
            with handled_signals():
                return fn(*args, **kwargs)
        except UsageError as exc:
            fail(str(exc), debug)
        except TimeLimitExceeded as exc:
            fail(f"{exc} (--timeout)", debug)
        except KeyboardInterrupt:  # Interrupted, or a Ctrl-C outside handled_signals
            fail("interrupted", debug, EXIT_INTERRUPTED)
        except Terminated as exc:
            if exc.signum == signal.SIGTERM:
                fail("terminated", debug, EXIT_TERMINATED)
            fail("terminated: its terminal hung up (SIGHUP)", debug, EXIT_HANGUP)
        except (SystemExit, click.exceptions.Exit):
            raise
        except OSError as exc:
            if exc.filename is None and exc.errno in _OUTPUT_ERRNOS:
                quiet_stdout()
                fail(f"cannot write the output: {exc.strerror}", debug)
            fail(internal_error_line(exc, debug), debug)
        except Exception as exc:  # noqa: BLE001 - nothing reaches the user as a raw traceback
            fail(internal_error_line(exc, debug), debug)

    return click.option("--debug", is_flag=True, help="Show tracebacks.")(wrapper)


def _replace_unencodable(stream):
    """A file name that is not UTF-8 (its bytes arrive as lone surrogates) is written as
    ``?`` rather than failing the report: JSON and SARIF stay valid UTF-8."""
    try:
        stream.reconfigure(errors="replace")
    except (AttributeError, ValueError, io.UnsupportedOperation):
        pass


def quiet_stdout():
    """Point stdout at /dev/null so that the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


class OneLineErrors(click.Group):
    """A click group whose usage errors are one line ``precisionaudit: error: ...`` (exit 2)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        _replace_unencodable(sys.stdout)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.ClickException as exc:
            click.echo(f"precisionaudit: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:  # Ctrl-C during click's own parsing
            click.echo("precisionaudit: error: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except OSError as exc:  # --help or --version onto a full disk or a closed pipe
            quiet_stdout()
            click.echo(f"precisionaudit: error: cannot write the output: {exc.strerror}", err=True)
            sys.exit(EXIT_USAGE)
        sys.exit(code if isinstance(code, int) else EXIT_OK)
