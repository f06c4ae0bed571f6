"""Every check `exactspec generate` makes before a model loads (a bad argument costs no 20 s load).

The target's shape comes from its files (`model_config`), the device from what this torch build offers,
the output path from the file system; each failure is a ValueError whose message names the argument.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from ..drafts.registry import validate_draft
from ..model_config import DEFAULT_NAME, ModelShape, default_gguf_path, model_shape

#: The hidden --tiny model's shape (`cli_run.load_target` builds it): 4 layers, 64 tokens, no chat template.
TINY_SHAPE = ModelShape(n_layers=4, vocab_size=64, has_tokenizer=True, has_chat_template=False)


@dataclass(frozen=True)
class Plan:
    """What the checks settled: the target's name and shape, whether to apply the chat template, the device."""

    name: str
    shape: ModelShape
    chat: bool
    device: str


def target_shape(args: argparse.Namespace) -> tuple[str, ModelShape]:
    """(name, shape) of the target the arguments pick, read from its files (ModelNotAvailableError if absent)."""
    if args.tiny and args.model:
        raise ValueError("--tiny and --model are mutually exclusive")
    if args.tiny:
        return "tiny random Llama (test model)", TINY_SHAPE
    if args.model:
        shape = model_shape(args.model)
        if shape.has_tokenizer is False:
            raise ValueError(
                f"--model {args.model} has no tokenizer next to it; exactspec generate needs one to "
                "encode the prompt"
            )
        return args.model, shape
    return DEFAULT_NAME, model_shape(default_gguf_path())


def chat_choice(args: argparse.Namespace, shape: ModelShape) -> bool:
    """--chat / --no-chat, or the model's default (on when its tokenizer has a chat template)."""
    if args.chat is None:
        return bool(shape.has_chat_template)
    if args.chat and shape.has_chat_template is False:
        raise ValueError("--chat: this model's tokenizer has no chat template (use --no-chat)")
    return args.chat


def check_device(requested: str | None) -> str:
    """The torch device to run on; ValueError saying why `requested` cannot be used with this torch build."""
    # torch: the checks before this one run for `generate --help` without it
    import torch

    if requested is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(requested)
    except (RuntimeError, ValueError):
        raise ValueError(
            f"--device {requested!r} is not usable here: not a torch device name "
            "(cpu, cuda, cuda:N, mps, ...)"
        ) from None
    if device.type == "cuda":
        if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
            raise ValueError(
                f"--device {requested}: CUDA requested but this torch build has none (torch "
                f"{torch.__version__} is a CPU build); use --device cpu or install a CUDA build of torch"
            )
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(
                f"--device {requested}: CUDA requested but no CUDA device is visible to this torch build"
            )
        if device.index is not None and device.index >= count:
            raise ValueError(
                f"--device {requested}: this machine has {count} CUDA device(s), numbered from 0"
            )
    if device.type == "mps":
        if not torch.backends.mps.is_built():
            raise ValueError(f"--device {requested}: MPS requested but this torch build has none")
        if not torch.backends.mps.is_available():
            raise ValueError(
                f"--device {requested}: MPS requested but it is not available on this machine"
            )
    try:
        torch.empty(0, device=device)
    except (RuntimeError, ValueError) as error:
        raise ValueError(f"--device {requested!r} is not usable here: {error}") from None
    return str(device)


def check_output(path: str | None) -> None:
    """--output names a file that can be written (its folder exists and is writable; it is not a folder)."""
    if path is None or path == "-":
        return
    target = Path(path).expanduser()
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise ValueError(f"--output {path}: is a directory; give a file name")
    if not folder.is_dir():
        raise ValueError(f"--output {path}: the folder {str(folder)!r} does not exist")
    if (
        target.exists()
        and not os.access(target, os.W_OK)
        or not target.exists()
        and not os.access(folder, os.W_OK)
    ):
        raise ValueError(f"--output {path}: not writable")


def check_before_loading(args: argparse.Namespace) -> Plan:
    """Every argument check that needs no weights, in the order a user fixes them; ValueError on the first failure."""
    check_output(args.output)
    name, shape = target_shape(args)
    validate_draft(args.draft, shape)
    chat = chat_choice(args, shape)
    return Plan(name, shape, chat, check_device(args.device))
