"""`python -m gateway` runs the command line."""

from gateway.cli.main import main

raise SystemExit(main())
