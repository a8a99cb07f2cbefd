"""Development only, never installed: real PostgreSQL and Redis from Python
packages (``dev.embedded``) and what ``scripts/run`` serves (``dev.run``)."""
