"""`python -m hookline.supervisor.cli ...`: the same as the `hookline` console script."""

import sys

from hookline.supervisor.cli.main import main

sys.exit(main())
