"""`python -m proofs`: run every machine check of the argument; exit status 1 if any fails."""

from exactspec.proofs.checks import main

raise SystemExit(main())
