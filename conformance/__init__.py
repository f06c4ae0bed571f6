"""exactspec conformance suite: certify any implementation of the speculative-sampling verification
rule against the exact oracle, with stated error rates. See conformance/CONTRACT.md.

    pytest conformance --impl mypkg.spec:Verifier [--profile quick|standard|full]
    exactspec certify --impl mypkg.spec:Verifier --out report/
"""

__all__ = ["CONTRACT_VERSION"]

CONTRACT_VERSION = "1.0"
