"""servesim: a discrete-event capacity-planning simulator for LLM inference serving."""

__version__ = "0.1.0"
