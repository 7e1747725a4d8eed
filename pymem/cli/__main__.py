"""`python -m pymem.cli`: the same command line as `pymem`."""

from . import main

main()
