"""Case files, read one way at every level whose cases are data (rule, tree): a JSON object with a non-empty
``cases`` list and only the level's top-level fields; each case a JSON object with a unique non-empty ``name``, only
the level's fields, its required ones, ``why`` a string and ``tags`` a list of strings. Each ValueError names the
file, the case and the field; the level checks the rest of each case (`one_case`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Sequence


def checked_case_fields(
    entry: Any, source: str, index: int | None, fields: Sequence[str], required: Sequence[str]
) -> str:
    """`entry`'s label for later errors (``"SOURCE: case 'NAME'"``), once its shared fields are well-formed."""
    label = f"{source}: case {index if index is not None else '?'}"
    if not isinstance(entry, dict):
        raise ValueError(f"{label} must be a JSON object, got {type(entry).__name__}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{label}: field 'name' must be a non-empty string, got {name!r}")
    where = f"{source}: case {name!r}"
    unknown = sorted(set(entry) - set(fields))
    if unknown:
        raise ValueError(f"{where}: unknown fields {unknown}; a case has {list(fields)}")
    missing = [f for f in required if f not in entry]
    if missing:
        raise ValueError(f"{where}: field {missing[0]!r} is required")
    if not isinstance(entry["why"], str):
        raise ValueError(f"{where}: field 'why' must be a string (the bug this case reaches)")
    tags = entry.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValueError(f"{where}: field 'tags' must be a list of strings, got {tags!r}")
    return where


def cases_from_file_data(
    data: Any, source: str, file_fields: Sequence[str], one_case: Callable[[Any, str, int], Any]
) -> list:
    """The cases of a parsed case file, each built by `one_case(entry, source, index)`; names must be unique."""
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise ValueError(f'{source}: a case file is a JSON object with a "cases" list')
    unknown = sorted(set(data) - set(file_fields))
    if unknown:
        raise ValueError(
            f"{source}: unknown top-level fields {unknown}; a case file has {list(file_fields)}"
        )
    if not data["cases"]:
        raise ValueError(f"{source}: field 'cases' is empty")
    cases: list = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(data["cases"]):
        case = one_case(entry, source, index)
        if case.name in seen:
            raise ValueError(
                f"{source}: case {case.name!r}: field 'name': duplicate name "
                f"(cases {seen[case.name]} and {index})"
            )
        seen[case.name] = index
        cases.append(case)
    return cases


def read_case_file(path: str | Path) -> Any:
    """The parsed JSON of a case file (ValueError naming the file when it cannot be read or parsed)."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"{path}: cannot read the case file ({error.strerror or error})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not a valid JSON file ({error})") from None


__all__ = ["cases_from_file_data", "checked_case_fields", "read_case_file"]
