"""Mutant zoo: buggy and valid verification rules the suite is tested against (see zoo.py)."""

from .zoo import MUTANTS, VALID, ZOO

__all__ = ["MUTANTS", "VALID", "ZOO"]
