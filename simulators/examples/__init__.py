"""Examples of plug-ins for ``gdro simulate --plugin`` (docs/simulator.md, "Your own method")."""
