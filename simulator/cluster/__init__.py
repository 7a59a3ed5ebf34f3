"""Replicas: what one replica is made of, how it is set up, and which replica a request goes to."""
