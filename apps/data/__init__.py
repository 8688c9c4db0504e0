"""Plain pandas views of run directories: what the app's pages and ``gdro report`` draw.

No Streamlit and no altair here, so every function is testable on its own and the report uses
the same numbers as the app. Import the module that defines a name (``from apps.data import
loading``); this package re-exports nothing.

  settings    where the app looks for runs (command line after ``--``, environment, default)
  loading     finding runs, reading them (``fastread``: pyarrow), the run cache, one-line errors
  listing     the list of runs under a folder from their small files (meta, config, last step)
  identity    a run's method, seed and the config keys that name it; ``groups`` the value types,
              ``colours`` a hue per method and a lightness per variant
  runtable    the Runs page's table and config diff; ``pins`` names and tags kept beside the app
  curriculum  bins and scalars, traveling-wave heatmaps and snapshots, lead-lag (Eq. 32)
  budget      rollout budget, budget frontier (Fig. 7-9), SE proxy (Eq. 33)
  results     outcomes, evaluations, comparisons across runs, flat configs
  realrun     real runs' per-benchmark evaluations and step-time breakdown
  study       seeds grouped, mean and 95% bands; ``sweep`` a final metric against swept keys
  scales      natural ranges, metric kinds, axis and colour domains
"""
