import sys

from attnaudit.cli import main

sys.exit(main())
