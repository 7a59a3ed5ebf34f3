"""Catalogs: model architectures and GPU specifications."""
