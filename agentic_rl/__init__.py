"""agentic-rl: agents that set and pursue their own goals.

Data flows env -> collector -> buffer -> algorithm.update -> logger/checkpoint; see README.md.
"""

__version__ = "0.1.0"
