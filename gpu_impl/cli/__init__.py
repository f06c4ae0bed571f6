"""`exactspec generate`: `cli` (entry point, torch-free), `cli_args` (options), `cli_inputs` (prompts, batches),
`cli_checks` (checks before a model loads), `cli_run` (load, decode), `cli_output` (text, figures, JSON).
"""
