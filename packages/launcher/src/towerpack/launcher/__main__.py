"""``python -m towerpack.launcher`` is the `launch` command."""

import sys

from towerpack.launcher.cli import main

sys.exit(main())
