"""Plain: the backbone reads the context once and answers from a copy of its state."""
