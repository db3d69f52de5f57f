import os
import sys

# OpenMP threads that spin while waiting steal the CPU from sibling jobs: on a busy 2-core machine two-thread
# audits ran 3-15x slower with the default (active) policy. Must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from attnaudit.cli import main  # noqa: E402

sys.exit(main())
