"""Re-certify the committed engine certificates from their own sample files with the current code: no server,
no collection. For when the engine level's checks or report change; the verdicts then rest on exactly the
samples that were collected.

    .venv/bin/python benchmarks/engine_recertify.py [--config NAME ...]

Each docs/certificates/engine/<config>/ with both sample files gets a new certificate.json and CERTIFICATE.md.
The run record (`certificate_run`: command, runtime, flags) and the collection notes are kept, and
`certificate_run.recertified` says when and by which exactspec. The index is regenerated after.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from engine_certificates import CONFIGS, OUT_ROOT, PROFILE, REPO, write_index

from exactspec import __version__
from exactspec.conformance.engine.engine_level import certify_samples
from exactspec.conformance.engine.certificate import write_engine_report
from exactspec.conformance.engine.samples import read_samples

#: The notes `engine_certificates._notes` wrote (kept); the rest are the level's own (written anew).
COLLECTION_NOTES = (
    "Build:",
    "Engine:",
    "Reference server flags:",
    "Candidate server flags:",
    "n = ",
    "Seed coupling declared:",
    "Collection took",
)


def _sample_file(folder: Path, name: str, tmp: Path) -> Path:
    """folder/name, or folder/name.gz decompressed into tmp (same file name, so the report names it alike)."""
    if (folder / name).is_file():
        return folder / name
    packed = folder / f"{name}.gz"
    if not packed.is_file():
        raise FileNotFoundError(f"{folder}: neither {name} nor {name}.gz")
    with gzip.open(packed, "rb") as src, open(tmp / name, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return tmp / name


def recertify(name: str) -> str:
    """Certify `name`'s committed samples again and rewrite its certificate; -> the verdict."""
    folder = OUT_ROOT / name
    old = json.loads((folder / "certificate.json").read_text())
    with tempfile.TemporaryDirectory(prefix=f"recertify-{name}-") as tmp:
        ref = read_samples(_sample_file(folder, "reference.jsonl", Path(tmp)))
        cand = read_samples(_sample_file(folder, "candidate.jsonl", Path(tmp)))
        result = certify_samples(ref, cand, PROFILE)
        result.notes = [n for n in old.get("notes", []) if n.startswith(COLLECTION_NOTES)] + list(
            result.notes
        )
        run = dict(old.get("certificate_run", {}))
        run["recertified"] = {
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "exactspec": __version__,
        }
        result.extra["certificate_run"] = run
        doc = write_engine_report(result, folder)["document"]
    # name the committed files, not the temporary copies
    for key in (
        "reference_file",
        "candidate_file",
    ):
        doc["engine"][key] = str(folder / Path(doc["engine"][key]).name)
    (folder / "certificate.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return doc["verdict"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config",
        nargs="*",
        default=None,
        help="configurations (default: every certificate present)",
    )
    args = parser.parse_args(argv)
    os.chdir(REPO)
    names = args.config or sorted(p.parent.name for p in OUT_ROOT.glob("*/certificate.json"))
    unknown = [
        n for n in names if n not in CONFIGS or not (OUT_ROOT / n / "certificate.json").is_file()
    ]
    if unknown:
        parser.error(f"no certificate to re-certify for {unknown}")
    verdicts = {name: recertify(name) for name in names}
    write_index(OUT_ROOT, CONFIGS)
    print(json.dumps(verdicts, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
