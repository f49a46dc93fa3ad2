"""One run of backbone x method x benchmark: the runner loop, run identity and folders, crash-safe
records, the run lock, shards and experiment tracking."""
