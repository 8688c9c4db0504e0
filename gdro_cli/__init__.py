"""The `gdro` console script: one front door, each subcommand imported lazily."""
