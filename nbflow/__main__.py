"""``python -m nbflow``: the ``nbflow`` command (see nbflow/cli.py)."""

import sys

from nbflow.cli import main

sys.exit(main())
