"""The ``python`` dialect: an in-process engine (`..backend.EngineBackend`) instead of two URLs, chosen by its own
flag ``--engine-adapter MODULE:CLASS`` (with ``--adapter-option KEY=VALUE``), behind the collector's client interface
(`inprocess_client.InProcessClient`): the same rounds, teacher forcing, certificate and exit codes, no HTTP.

There is no server whose load a design could set: the candidate is sampled with no lone requests and no background
load (both flags are refused), and `load.measure` reads the calls' own intervals.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from ..backend import parse_options
from .client import SamplerChain
from .dialect_plugin import Capabilities, Connection, DialectPlugin
from .inprocess_client import ADAPTER_SCHEME, InProcessClient, python_request


@dataclass(frozen=True)
class PythonOptions:
    """Which class to build (MODULE:CLASS) and its keyword arguments."""

    spec: str = ""
    options: tuple[tuple[str, str], ...] = ()


class PythonDialect(DialectPlugin):
    """An in-process engine backend: ``CLASS(role="reference"|"candidate", **options)``, asked complete/report."""

    name = "python"
    describe = "an in-process engine (--engine-adapter MODULE:CLASS: complete and report, no HTTP)"
    capabilities = Capabilities(speculation="timings", has_server=False)
    options_type = PythonOptions
    by_name = False

    @property
    def group_title(self) -> str:
        return "in process (--engine-adapter): a Python engine instead of two URLs"

    @property
    def only_with(self) -> str:
        return "--engine-adapter"

    def add_arguments(self, group: argparse._ArgumentGroup, command: str) -> None:
        group.add_argument(
            "--engine-adapter",
            metavar="MODULE:CLASS",
            help="certify an in-process Python engine "
            "instead of two URLs: built as CLASS(role='reference'|'candidate', **options) and asked "
            "complete/report (exactspec.conformance.engine.backend.EngineBackend; default: none, "
            "two URLs)",
        )
        group.add_argument(
            "--adapter-option",
            action="append",
            metavar="KEY=VALUE",
            help="a keyword argument of the class (repeatable; values are strings; default: none)",
        )

    def selected_by(self, args: argparse.Namespace) -> bool:
        return bool(args.engine_adapter)

    def options_from(self, args: argparse.Namespace, command: str) -> PythonOptions:
        return PythonOptions(
            args.engine_adapter, tuple(parse_options(args.adapter_option or []).items())
        )

    def endpoints(
        self, options: PythonOptions, reference: tuple[str, ...], candidate: tuple[str, ...]
    ) -> dict:
        """Both roles are the class (``python:MODULE:CLASS``); URLs are refused beside it."""
        if reference or candidate:
            raise ValueError(
                "--engine-adapter: give either the adapter or --reference-url/--candidate-url, not both"
            )
        if not options.spec:
            raise ValueError("--engine-adapter: give MODULE:CLASS")
        return {role: (ADAPTER_SCHEME + options.spec,) for role in ("reference", "candidate")}

    def default_engine_name(self, options: PythonOptions) -> str:
        return options.spec

    def make_client(
        self, url: str, role: str, options: PythonOptions, connection: Connection
    ) -> InProcessClient:
        return InProcessClient(url.removeprefix(ADAPTER_SCHEME), role, dict(options.options))

    def request_defaults(self, chain: SamplerChain, options: PythonOptions) -> dict:
        return python_request(chain)


__all__ = ["PythonDialect", "PythonOptions"]
