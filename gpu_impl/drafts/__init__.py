"""Draft sources: each proposes tokens and the q they were sampled from, behind one `DraftSource` interface.

`registry` is the table of the sources `exactspec generate --draft` offers. The classes are imported on
first use (PEP 562), so the registry (and the CLI's --help) can be read without importing torch.
"""

import importlib

_LAZY = {
    "DraftSource": ".base",
    "EarlyExitDraft": ".early_exit",
    "ModelDraft": ".model_draft",
    "PromptLookupDraft": ".prompt_lookup",
    "QuantizedSelfDraft": ".quantized",
    "HeadsDraft": ".heads",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DraftSource",
    "ModelDraft",
    "QuantizedSelfDraft",
    "PromptLookupDraft",
    "EarlyExitDraft",
    "HeadsDraft",
]
