"""Schedulers: queues, what a step emits, and the continuous, static and speculative
schedulers (DESIGN.md section 4)."""
