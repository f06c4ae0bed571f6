"""What every command does when exactspec itself crashes: the traceback, a request to report it, exit status 3.

Below the commands (the dispatcher `cli` and each subcommand use it), so a subcommand never imports the dispatcher.
"""

from __future__ import annotations

import sys
import traceback

from .outcomes import ExitCode

EXIT_INTERNAL = ExitCode.INTERNAL
INTERNAL_ERROR_HINT = (
    "exactspec: internal error (a bug in exactspec, not in your implementation). Please report it "
    "with the traceback above and the command line: {command}"
)


def internal_crash(command: str) -> int:
    """Print the current exception's traceback and a request to report it; the exit status 3."""
    traceback.print_exc()
    print(INTERNAL_ERROR_HINT.format(command=command), file=sys.stderr)
    return EXIT_INTERNAL
