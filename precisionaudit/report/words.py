"""Counted nouns for messages people read: "1 error", "4 errors", "1 op", never "finding(s)"."""

_IRREGULAR = {"info": "info"}


def plural(count: int, noun: str) -> str:
    """``count`` and ``noun``, in the plural unless ``count`` is 1 ("0 errors", "2 info")."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {_IRREGULAR.get(noun, noun + 's')}"
