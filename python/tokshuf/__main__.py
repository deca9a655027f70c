"""``python -m tokshuf`` is the ``tokshuf`` command."""

import sys

from tokshuf.cli import main

sys.exit(main())
