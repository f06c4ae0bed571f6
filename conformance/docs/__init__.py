"""The docs from one source: the texts the README, the docs pages and the certificate indexes share, rendered
from the code's constants and the certificates' JSON into marked regions (`regions`), rewritten by
``python -m exactspec.conformance.docs --write`` and checked by ``--check`` and tests/test_docs_consistency.py.
"""
