"""`python -m colosched.cli`, the same as the `colosched` command."""

import sys

from colosched.cli import main

sys.exit(main())
