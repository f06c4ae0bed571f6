"""The rule level: one verification round per call (`verify` / `verify_batch`), certified on curated cases
against the exact oracle. Declared to the conformance core in `level` (cases, registered checks, invariants,
confirmation, reference adapter, mutants); the core's driver runs it."""
