"""Counted nouns for messages people read: "1 error", "4 errors", "1 op", never "finding(s)"."""

_IRREGULAR = {"info": "info"}


def plural(count: int, noun: str) -> str:
    """``count`` and ``noun``, in the plural unless ``count`` is 1 ("0 errors", "2 info")."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {_IRREGULAR.get(noun, noun + 's')}"


#: what a variant's status says of it, as the end of a sentence whose subject is the variant
#: ("the baseline variant diverges"): the check's and check --train's statuses alike
_STATUS_PHRASES = {"ok": "is within tolerance", "exceeds_tolerance": "is out of tolerance",
                   "nonfinite": "went non-finite (inf/NaN)", "diverges": "diverges", "error": "raised an error"}


def status_phrase(status: str) -> str:
    """A variant's status as a verb phrase: "diverges", "is out of tolerance", ..."""
    return _STATUS_PHRASES.get(status, f"is {status.replace('_', ' ')}")


def verdict(passed: bool, variant: str, status: str) -> str:
    """The verdict line of a check: "FAILED: the baseline variant diverges"."""
    return f"{'PASSED' if passed else 'FAILED'}: the {variant} variant {status_phrase(status)}"
