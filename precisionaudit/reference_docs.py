"""The generated pages of docs/: one per rule (docs/rules/<ID>.md), the rule catalog
(docs/rules/index.md) and the command-line reference (docs/cli.md).

They are made from the rule packs and the click commands, so they cannot drift from the
code; a test regenerates them and compares. After changing a rule or a flag, run
``python -m precisionaudit.reference_docs`` (it writes below ./docs, or the folder
given).
"""
from __future__ import annotations

import os
import sys

import click

WIDTH = 96  # --help is wrapped at this width in docs/cli.md, wherever it is generated


def cli_page(group: click.Group) -> str:
    """Every command's ``--help``, as ``precisionaudit CMD --help`` prints it."""
    parts = ["# Command line", "",
             "Generated from the commands themselves (`precisionaudit CMD --help` prints the same). "
             "Exit codes: [exit-codes.md](exit-codes.md).", ""]
    for name, command in group.commands.items():
        ctx = click.Context(command, info_name=f"precisionaudit {name}", terminal_width=WIDTH,
                            max_content_width=WIDTH)
        parts += [f"## `precisionaudit {name}`", "", "```text", command.get_help(ctx).rstrip(), "```", ""]
    return "\n".join(parts)


def all_pages() -> dict[str, str]:
    from .cli import main
    from .rules.docs import markdown_pages
    from .rules.engine import load_rules

    return {**markdown_pages(load_rules(checks=False)), "cli.md": cli_page(main)}


def write(folder: str) -> list[str]:
    written = []
    for rel, text in all_pages().items():
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        written.append(path)
    return written


def _main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m precisionaudit.reference_docs",
                                     description="Regenerate the rule pages and docs/cli.md.")
    parser.add_argument("folder", nargs="?", default="docs", help="where to write (default: docs)")
    for written_path in write(parser.parse_args(argv).folder):
        print(written_path)


if __name__ == "__main__":
    _main(sys.argv[1:])
