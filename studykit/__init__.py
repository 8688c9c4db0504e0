"""What every study of the project shares, outside the core: claims, intervals, tables, lr grids, step
matching and figures. Imports the core (gdro_lab) only; the simulator's studies and the CPU LM study
import it and never each other. The modules: docs/studies-notes.md#studykit.
"""
