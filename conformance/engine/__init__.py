"""The engine level: certify a serving engine black-box from samples of its plain mode (the reference) and
its speculative mode (the candidate). See conformance/CONTRACT.md, "Engine level".

Modules: `samples` (the JSONL sample files), `pit` (checks
against the reference's reported probabilities), `hard` (zero-false-fail checks and speculation evidence),
`level` (the level on the conformance core: settings, declared checks, budget, verdict), `checks` (the
offline certification run), `report` (certificate), `certify_samples` (`exactspec certify-samples`).
Importing this package imports nothing heavy; the offline modules need numpy/scipy/statsmodels only.
"""
