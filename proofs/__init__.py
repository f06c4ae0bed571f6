"""exactspec's correctness argument for auditors: `ARGUMENT.md` (the claims C1..C18 and their proofs) and
the machine checks each claim lists (`registry.py` holds them; `python -m exactspec.proofs` runs them all).

proofs/ re-derives the rule, the residual and the exact laws itself (`kernels.py`) on purpose: it must
not take the oracle's implementations as the truth it checks them against. The oracle is imported only
inside a check whose claim is about that code, as the default of the argument under test.
"""
