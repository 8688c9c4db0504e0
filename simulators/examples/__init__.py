"""Examples of plug-ins for ``gdro simulate --plugin`` (docs/simulator-methods.md, "Your own method")."""
