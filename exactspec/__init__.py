"""exactspec: the reference that speculative-sampling implementations are measured against."""

__version__ = "0.1.0"
