"""``python hack/gen_crds [--check]``: see gen_crds.cli."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gen_crds.cli import main

sys.exit(main())
