"""``python -m nbflow``: the ``nbflow`` command (see nbflow/cli.py)."""

import sys

from .cli import main

sys.exit(main())
