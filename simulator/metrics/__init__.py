"""Run metrics: per-request records, step tables, summaries, cost, and speculative and degrade
figures (DESIGN.md section 5)."""
