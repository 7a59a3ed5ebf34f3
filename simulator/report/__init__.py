"""The report toolkit: every servesim report, in Markdown and as a self-contained HTML page.

- :mod:`~simulator.report.format`: number formatting shared by every report;
- :mod:`~simulator.report.tables`: Markdown tables (``DataFrame.to_markdown``) and the CSV +
  Parquet writer;
- :mod:`~simulator.report.render`: the jinja2 templates (``templates/``), Markdown to HTML
  with the figures embedded;
- :mod:`~simulator.report.figures`: figure helpers and the run figures (matplotlib, imported
  on first use);
- one module per report: :mod:`~simulator.report.run` (``servesim run``),
  :mod:`~simulator.report.compare`, :mod:`~simulator.report.sweep`,
  :mod:`~simulator.report.spec_sweep`, :mod:`~simulator.report.validation`
  (``validate --recorded``); the capacity plan's is :mod:`simulator.planner.report`;
- sections shared or kept apart: :mod:`~simulator.report.bounds` (what bounds the run),
  :mod:`~simulator.report.degrade` (degrade actions).

Submodules are imported on use, so importing this package is cheap.
"""
