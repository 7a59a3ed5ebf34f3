"""The bottom floor: what every layer may use (schema base, requests, seeded random streams,
packaged resources, progress, budgets, output folders, input bounds, the one percentile
definition, the garbage collector's freeze)."""
