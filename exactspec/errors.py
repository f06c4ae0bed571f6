"""The exceptions of exactspec, under one root so callers can tell the suite's signals from anything else.

Nothing here derives from AssertionError: an implementation's own ``assert`` must never be mistaken for a
verdict of the suite. Importing this module is free (no numpy, no torch).
"""

from __future__ import annotations


class ExactspecError(Exception):
    """Root of every exception exactspec raises on purpose."""


class AdapterLoadError(ExactspecError, ValueError):
    """An adapter spec ("MODULE:NAME" or a builtin name) cannot be turned into an adapter object.

    A ValueError too, because it is bad input to `--impl`; `module` names the module when the import
    itself failed and `cause` keeps the original exception.
    """

    def __init__(
        self, message: str, module: str | None = None, cause: BaseException | None = None
    ) -> None:
        super().__init__(message)
        self.module = module
        self.cause = cause


class ImplUnavailable(ExactspecError, RuntimeError):
    """An adapter cannot run here (missing package, no CUDA device, signature no longer fits): a skip."""


class Unsupported(ExactspecError):
    """A sequence-level adapter cannot run one configuration (recorded as 'unsupported', not a failure)."""


class ContractViolation(ExactspecError):
    """The implementation's output breaks the interface contract (type, shape, length, range)."""


class ImplementationError(ExactspecError):
    """The implementation raised while running a valid input; that case fails, the run goes on.

    `exc_type` is the original exception's class name, `traceback_text` its formatted traceback and
    `original` the exception itself (None when unknown).
    """

    def __init__(
        self,
        message: str,
        exc_type: str = "",
        traceback_text: str = "",
        original: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.exc_type = exc_type
        self.traceback_text = traceback_text
        self.original = original


__all__ = [
    "AdapterLoadError",
    "ContractViolation",
    "ExactspecError",
    "ImplUnavailable",
    "ImplementationError",
    "Unsupported",
]
