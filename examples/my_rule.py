"""An example rule-level adapter: a textbook NumPy implementation of the standard rule, written the way
a user of exactspec would write one for their own library (it does not use exactspec's oracle).

    cp examples/my_rule.py . && pytest --pyargs exactspec.conformance --exactspec-impl my_rule:Verifier
"""

import numpy as np


class Verifier:
    def verify(self, target_probs, draft_probs, draft_tokens, rng):
        """Accept x_i w.p. min(1, p_i(x_i)/q_i(x_i)); at the first rejection sample norm(max(0, p_i - q_i));
        after k acceptances sample the bonus token from p_{k+1}."""
        emitted = []
        for i, token in enumerate(draft_tokens):
            p, q = target_probs[i], draft_probs[i]
            # u < p/q without dividing; never accepts p(x) = 0
            if rng.random() * q[token] < p[token]:
                emitted.append(int(token))
                continue
            leftover = np.maximum(p - q, 0.0)
            weights = leftover if leftover.sum() > 0 else p
            emitted.append(int(rng.choice(weights.size, p=weights / weights.sum())))
            return emitted
        last = target_probs[len(draft_tokens)]
        emitted.append(int(rng.choice(last.size, p=last / last.sum())))
        return emitted
