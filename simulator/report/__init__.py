"""Run reports: Markdown report, terminal table and matplotlib figures.

Submodules are imported on use (``simulator.report.markdown``, ``simulator.report.figures``)
so that importing this package does not pull in matplotlib.
"""
