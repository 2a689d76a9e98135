"""Write a text file atomically: a crash or a full disk never leaves a truncated file behind."""
import os

from .errors import UsageError


def write_text_atomic(path: str, text: str, what: str) -> None:
    import tempfile  # not at import: a scan that writes nothing (a hook's) never needs it

    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".precisionaudit-{what}-", dir=directory)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write {what}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as fh:  # a non-UTF-8 file name: ?
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; baselines and plans are meant to be committed
        os.replace(tmp, path)
    except OSError as exc:
        os.unlink(tmp)
        raise UsageError(f"{path}: cannot write {what}: {exc.strerror}") from exc
    except BaseException:
        os.unlink(tmp)
        raise
