"""`python -m adapters.discord sync|run`."""

from adapters.discord.cli import main

raise SystemExit(main())
