"""`python -m cpverify.probe`: the probe command alone, as `cpverify probe`."""

import sys

from cpverify.cli import main

raise SystemExit(main(["probe", *sys.argv[1:]], commands=("probe",)))
