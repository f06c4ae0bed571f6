"""The generation loop: `generator.SpeculativeGenerator` (draft, verify, roll back) and `plain.generate_plain`.

`kv` keeps a model's ragged-batch KV cache; `prompts` checks arguments and collects each row's tokens;
`stats` holds the counters and the result type. The readable one-screen version of the same loop is
`conformance/sequence/reference_loop.py`.
"""
