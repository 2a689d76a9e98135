"""Prune a plan: drop the overrides that checks show the model does not need (``plan --prune``)."""
