"""Scaling out on Ray (SPEC S2): sweeps of ordinary training runs with Ray Tune (``sweep``).

Ray is an optional extra (``pip install agentic-rl[ray]``); nothing here imports it until a
sweep starts.
"""
