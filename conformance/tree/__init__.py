"""Tree level of the conformance suite: one round of tree verification (`verify_tree(tree, rng)`).

    from exactspec.conformance import certify
    cert = certify(my_verifier, level="tree", profile="quick")   # cert.verdict

Cases are data (`conformance/case_data/trees.json`), the oracle is `exactspec.reference.tree_rules` /
`tree_laws`, the checks are declared in `registry.TREE_CHECKS` and the level in `level`; see
conformance/CONTRACT.md (tree level).
"""
