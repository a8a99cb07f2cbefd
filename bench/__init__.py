"""The benchmark: ``scripts/bench`` (see bench/run.py). Not part of the app."""
