"""Training loops, evaluation, logging and checkpoints."""
