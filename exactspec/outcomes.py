"""The verdicts every level gives and the exit codes every command returns: one table each, one meaning a code.

Both are `str` / `int` enums, so a verdict compares equal to its name (certificates store the name) and an exit code
is the int a shell sees. Importing this module is free (no numpy, no torch): it sits below every layer.
"""

from __future__ import annotations

import textwrap
from enum import Enum, IntEnum


class Verdict(str, Enum):
    """A certificate's verdict, worst first (`conformance.core.records` says what each requires)."""

    CONTRACT_VIOLATION = "CONTRACT_VIOLATION"
    NOT_EXACT = "NOT_EXACT"
    INCONCLUSIVE = "INCONCLUSIVE"
    QUALIFIED = "QUALIFIED"
    EXACT_NOT_STANDARD = "EXACT_NOT_STANDARD"
    CERTIFIED = "CERTIFIED"

    __str__ = str.__str__  # "CERTIFIED", not "Verdict.CERTIFIED", in messages and f-strings
    __format__ = str.__format__  # type: ignore[assignment]  # (Enum types it as a method of its own)

    @property
    def exit_code(self) -> "ExitCode":
        """The exit code a command returns for this verdict."""
        return VERDICT_EXIT[self]


class ExitCode(IntEnum):
    """What a command's exit status means, the same in every command (`exactspec --help` prints `EXIT_CODES_HELP`)."""

    OK = 0  # CERTIFIED or EXACT_NOT_STANDARD; a command other than a certification did what was asked
    NOT_EXACT = 1  # NOT_EXACT or CONTRACT_VIOLATION: the implementation or engine failed a check
    USAGE = 2  # bad arguments or input files: the message names the argument, file, line or field
    INTERNAL = 3  # exactspec itself crashed: a bug to report, with the traceback
    INCONCLUSIVE = 4  # nothing failed, but the run cannot decide: the report says what would
    # the target is reached only for the deviations the certificate names, not for any shape
    QUALIFIED = 5
    UNAVAILABLE = 6  # what was to be run cannot run here: an engine unreachable or failing, a missing package or device
    INCOMPLETE = 7  # a collection stopped at its limit before it had every record: rerun the command to resume


#: Verdict -> exit code. EXACT_NOT_STANDARD is exact (a pass); its report says it is not the standard rule.
VERDICT_EXIT: dict[Verdict, ExitCode] = {
    Verdict.CERTIFIED: ExitCode.OK,
    Verdict.EXACT_NOT_STANDARD: ExitCode.OK,
    Verdict.QUALIFIED: ExitCode.QUALIFIED,
    Verdict.INCONCLUSIVE: ExitCode.INCONCLUSIVE,
    Verdict.NOT_EXACT: ExitCode.NOT_EXACT,
    Verdict.CONTRACT_VIOLATION: ExitCode.NOT_EXACT,
}

#: The codes every certification command can return: its verdicts', a usage error and a crash, in order.
CERTIFICATION_EXIT_CODES: tuple[ExitCode, ...] = tuple(
    sorted(set(VERDICT_EXIT.values()) | {ExitCode.USAGE, ExitCode.INTERNAL})
)

#: The width the epilog's lines are wrapped at.
HELP_WIDTH = 100
#: One line per exit code, for every command's --help epilog.
EXIT_MEANING: dict[ExitCode, str] = {
    ExitCode.OK: "done: CERTIFIED or EXACT_NOT_STANDARD (exact, not the standard rule's acceptance), or what was asked",
    ExitCode.NOT_EXACT: "NOT_EXACT or CONTRACT_VIOLATION",
    ExitCode.USAGE: "usage error: bad arguments or input file (the message names the argument, file, line or field)",
    ExitCode.INTERNAL: "exactspec itself crashed (a bug in exactspec: please report it, with the traceback)",
    ExitCode.INCONCLUSIVE: "INCONCLUSIVE: nothing failed, but the run cannot decide (the report says what would)",
    ExitCode.QUALIFIED: "QUALIFIED: the target reached only for the class of deviations the certificate names",
    ExitCode.UNAVAILABLE: "unavailable: an engine unreachable or failing, a missing package or device (the message "
    "says what to fix)",
    ExitCode.INCOMPLETE: "incomplete: a collection stopped at its limit; rerun the same command to resume",
}


def exit_codes_help(
    codes: "tuple[ExitCode, ...] | None" = None, notes: "dict[ExitCode, str] | None" = None
) -> str:
    """The exit-status epilog of a command: the codes it can return (all by default), each with its meaning and the
    command's own note on it (a note's later lines, after a newline, are indented below it: a list)."""
    lines = ["exit status:"]
    for code in codes or tuple(ExitCode):
        first, *more = ((notes or {}).get(code) or "").split("\n")
        text = f"  {int(code)}  {EXIT_MEANING[code]}" + (f"; {first}" if first else "")
        lines.append(
            textwrap.fill(text, width=HELP_WIDTH, subsequent_indent=" " * 5, break_on_hyphens=False)
        )
        lines += [
            textwrap.fill(
                part,
                width=HELP_WIDTH,
                initial_indent=" " * 5,
                subsequent_indent=" " * 7,
                break_on_hyphens=False,
            )
            for part in more
        ]
    return "\n".join(lines) + "\n"


__all__ = [
    "CERTIFICATION_EXIT_CODES",
    "EXIT_MEANING",
    "ExitCode",
    "VERDICT_EXIT",
    "Verdict",
    "exit_codes_help",
]
