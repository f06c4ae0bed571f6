"""exactspec inside another engine's virtual environment (vLLM's, llama-cpp-python's): installed from the checkout
the running exactspec came from, so that adapters that import the engine run there against the same code."""

from __future__ import annotations

import json
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse


class ForeignVenvError(RuntimeError):
    """exactspec could not be installed into another venv."""


def exactspec_source() -> tuple[str, bool]:
    """Where the running exactspec was installed from (a local directory) and whether editable (PEP 610's
    direct_url.json); ForeignVenvError when it was not installed from a local directory."""
    records = [
        json.loads(dist.read_text("direct_url.json") or "{}")
        for dist in metadata.distributions(name="exactspec")
    ]
    # not a checkout's egg-info
    record: dict = next((r for r in records if r.get("url", "").startswith("file://")), {})
    url = record.get("url", "")
    if not url.startswith("file://"):
        raise ForeignVenvError(
            "installing exactspec into an engine's venv needs the checkout it runs from, but this "
            "exactspec was not installed from a local directory (pip install -e .)"
        )
    return unquote(urlparse(url).path), bool(record.get("dir_info", {}).get("editable"))


def has_exactspec(python: str | Path) -> bool:
    """Whether `python` imports this exactspec: the running one's checkout (an editable install elsewhere, say of an
    older clone, is not it)."""
    # -I: not from the current directory (a checkout's root holds an `exactspec` folder that imports by itself)
    found = subprocess.run(
        [str(python), "-I", "-c", "import exactspec; print(exactspec.__file__)"],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    if found.returncode != 0 or not (Path(python).parent / "exactspec").is_file():
        return False
    source, editable = exactspec_source()
    return not editable or Path(found.stdout.strip()).resolve().is_relative_to(
        Path(source).resolve()
    )


def install_exactspec(python: str | Path, log_path: Path, extras: str = "") -> None:
    """pip install exactspec (editable when the running one is) with `extras` (e.g. "[engine]") into the venv of
    `python`, its output appended to `log_path`; ForeignVenvError with the log's tail on failure."""
    source, editable = exactspec_source()
    command = [
        str(python),
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        *(["-e"] if editable else []),
        f"{source}{extras}",
    ]
    with open(log_path, "a") as log:
        log.write(f"\n$ {' '.join(command)}\n")
        log.flush()
        result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
        raise ForeignVenvError(
            f"pip install of exactspec into {python} failed (exit {result.returncode}):\n{tail}"
        )


__all__ = ["ForeignVenvError", "exactspec_source", "has_exactspec", "install_exactspec"]
