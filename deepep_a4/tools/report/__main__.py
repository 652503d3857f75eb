"""`python -m deepep_a4.tools.report`: the same as `deepep-a4 report`."""

import sys

from deepep_a4.tools.report.cli import main

sys.exit(main())
