"""The conformance core shared by every level (rule, sequence, engine): profiles, check registry and error
budget, records and verdicts, the result type and the certificate writer. Torch-free."""

from .profiles import (
    LEVELS, PROFILE_NAMES, PROFILES, EngineSettings, Profile, RuleSettings, SequenceSettings, get_profile,
)
from .records import (
    CATEGORIES,
    STATISTICAL_CATEGORIES,
    VERDICT_TEXT,
    VERDICTS,
    CheckRecord,
    case_seed,
    hard_failure,
    hard_result,
    verdict_of,
)
from .registry import (
    REGISTRY, REPORTED_PROBS_CHECK, StatCheck, budget_for, planned_checks, planned_names, run_registered,
)
from .report import SCHEMA_VERSION, SuiteResult, document, summarize_budget, write_report

__all__ = [
    "CATEGORIES", "EngineSettings", "LEVELS", "PROFILES", "PROFILE_NAMES", "REGISTRY", "REPORTED_PROBS_CHECK",
    "SCHEMA_VERSION", "STATISTICAL_CATEGORIES",
    "VERDICTS", "VERDICT_TEXT", "CheckRecord", "Profile", "RuleSettings", "SequenceSettings", "StatCheck",
    "SuiteResult", "budget_for", "case_seed", "document", "get_profile", "hard_failure", "hard_result",
    "planned_checks", "planned_names", "run_registered", "summarize_budget", "verdict_of", "write_report",
]
