"""Environments: construction from config, goal-conditioned interface, curricula."""
