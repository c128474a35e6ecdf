"""`python -m cpverify.doctor`: the doctor alone, as `cpverify doctor`, importing nothing the other
commands need, so it works where they are broken."""

import sys

from cpverify.cli import main

sys.exit(main(["doctor", *sys.argv[1:]], commands=("doctor",)))
