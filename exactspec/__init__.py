"""exactspec: the reference that speculative-sampling implementations are measured against."""

from importlib.metadata import version

from .errors import ExactspecError


def _installed_version() -> str:
    """The installed distribution's version (pyproject.toml is the one source), else a placeholder."""
    try:
        return version("exactspec")
    except Exception:  # noqa: BLE001 -- e.g. run from a source tree that is not installed
        return "0+unknown"


__version__ = _installed_version()

__all__ = ["ExactspecError", "__version__"]
