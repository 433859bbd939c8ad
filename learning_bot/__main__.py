"""`python -m learning_bot ...`: the same as the `learning-bot` command."""

import sys

from learning_bot.cli import main

sys.exit(main())
