"""The SimPy loop: arrivals, one process per replica, fast-forwarded decode runs and their
step rows, expert-parallel ranks in lockstep."""
