"""exactspec's correctness argument for auditors: `ARGUMENT.md` (the claims C1..C12 and their proofs)
and `checks.py` (the machine checks each claim lists). `python -m proofs` runs every check."""
