import sys

from pcspec.cli import main

sys.exit(main())
