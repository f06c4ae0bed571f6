"""Where exactspec keeps what it computes once per machine (converted model weights, CPU kernel plans, the
llama.cpp build): one directory shared by every virtual environment of the user."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$EXACTSPEC_CACHE``, else ``$XDG_CACHE_HOME/exactspec``, else ``~/.cache/exactspec``."""
    if os.environ.get("EXACTSPEC_CACHE"):
        return Path(os.environ["EXACTSPEC_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "exactspec"
    return Path.home() / ".cache" / "exactspec"
