"""The engine level: certify a serving engine black-box from samples of its plain mode (the reference) and
its speculative mode (the candidate). See conformance/CONTRACT.md, "Engine level".

Three parts:

* this package's modules: the offline certification, torch-free and httpx-free (numpy, scipy, statsmodels):
  `samples` (the JSONL sample files), `pit` (checks against the reference's reported probabilities), `hard`
  (zero-false-fail checks and speculation evidence),
  `engine_level` (the level on the conformance core), `checks`, `check_table` (its statistical checks),
  `profile_settings`, `certificate` (the certificate's writer), `certify_samples` (`exactspec certify-samples`),
  `backend` (the in-process seam, `EngineBackend`);
* `collect/`: sampling endpoints over HTTP (httpx): clients per dialect, bounded resumable jobs, `exactspec engine
  collect`;
* `serve/`: the servers the tests and certificates start on 127.0.0.1 (llama.cpp, vLLM, exactspec's own
  generators and mutants) and the engine mutant zoo.
"""
