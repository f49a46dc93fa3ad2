"""JRT: the context is read twice (Just Read Twice), then the question is answered."""
