"""Measured kernel tables: files, grids, lookups and the table sets of a GPU."""
