"""`python -m supervisor.cli ...`: the same as the `hookline` console script."""

import sys

from supervisor.cli.main import main

sys.exit(main())
