"""Draft sources: each proposes tokens and the q they were sampled from, behind one `DraftSource` interface."""

from .base import DraftSource
from .early_exit import EarlyExitDraft
from .model_draft import ModelDraft
from .prompt_lookup import PromptLookupDraft
from .quantized import QuantizedSelfDraft

__all__ = ["DraftSource", "ModelDraft", "QuantizedSelfDraft", "PromptLookupDraft", "EarlyExitDraft"]
