"""``python -m scd``: the scd command line."""

import sys

from scd.cli import main

sys.exit(main())
