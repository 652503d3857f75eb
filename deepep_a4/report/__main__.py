"""`python -m deepep_a4.report`: the same as `deepep-a4 report`."""

import sys

from deepep_a4.report.cli import main

sys.exit(main())
