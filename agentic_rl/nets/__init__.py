"""Neural network building blocks (plain ``nn.Module``s, no training logic)."""
