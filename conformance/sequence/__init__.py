"""Sequence-level certification: tests of the *generated sequences* of a speculative generator.

Rule-level tests see one verification round; bugs in the generation loop (draft warped differently from
the q in the ratio, target rows conditioned on rejected tokens, caches not rolled back, batch rows mixed
up, EOS and max-token handling) only show in the law of whole sequences. See conformance/CONTRACT.md
(sequence level). The level is declared in `level` and run by the core's driver:

    from exactspec.conformance import certify
    cert = certify("transformers-assisted", level="sequence", profile="quick")
    cert.write("cert/")   # cert/certificate.json (schema 2.1, level "sequence") and cert/CERTIFICATE.md

Importing this package imports no torch; its models and adapters do.
"""
