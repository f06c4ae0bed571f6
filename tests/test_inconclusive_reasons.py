"""`exactspec certify-samples --help` names every kind of reason the engine level gives for INCONCLUSIVE: each kind's
wording in the help, and the code that produces it (`engine.engine_level`, `engine.result`), are checked together, so that a new kind of
reason (or a removed one) fails here until the help says so."""

from __future__ import annotations

import inspect
import re

from exactspec.conformance.engine import engine_level as level
from exactspec.conformance.engine import result
from exactspec.conformance.engine.certify_samples import EXIT_CODES_HELP

#: reason kind -> (words of the help, words of the code that produces it)
KINDS = {
    "void reports": ("the checks that read them are void", "its law routes are void"),
    "speculation not observed": ("speculation was never observed", "speculation not observed"),
    "a prompt dropped": ("a prompt one side dropped", "dropped: the reference holds"),
    "law checks not run": ("law checks that could not run", "the law checks did not run"),
    "reference tokens not forced": (
        "reference tokens with no teacher-forced report",
        "no teacher-forced report",
    ),
    "a check on nothing": ("a check that ran on nothing", "ran on nothing (n = 0)"),
    "short of the target": ("it is short of the target", "underpowered"),
}


def test_the_help_names_every_kind_of_inconclusive_reason_the_code_gives():
    help_text = " ".join(EXIT_CODES_HELP.split())
    code = inspect.getsource(level) + inspect.getsource(result)
    for kind, (in_help, in_code) in KINDS.items():
        assert in_help in help_text, f"{kind}: not in certify-samples --help"
        assert in_code in code, f"{kind}: the engine level no longer gives it"
    reasons_built = code.count("self.inconclusive = ")
    assert reasons_built == 1, "the verdict's reasons are built in one place"
    judged = inspect.getsource(result.EngineResult.judge)
    built = judged[judged.index("self.inconclusive = ") + len("self.inconclusive = ") :]
    sources = set(re.findall(r"self\.(\w+)", built))
    assert sources == {
        "speculation_observed",
        "input_reasons",
        "underpowered",
        "qualified",
        "short_of_any_shape",
    }, (
        f"sources of INCONCLUSIVE reasons changed: {sorted(sources)}: say so in certify-samples --help"
    )
    assert "5  QUALIFIED" in EXIT_CODES_HELP
