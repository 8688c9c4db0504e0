"""The toy studies behind ``gdro simulate STUDY``: each writes run directories and a report."""

STUDIES = ("curriculum", "sqrt-law", "surrogate", "ablation", "arena")
