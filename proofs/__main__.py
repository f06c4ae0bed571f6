"""`python -m exactspec.proofs`: run every machine check of the argument; exit status 1 if any fails."""

from .cli import main

raise SystemExit(main())
