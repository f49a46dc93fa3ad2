"""The bottom layer: the run schema and its validation, the registries, errors, paths and the types
every other layer shares (Question, Example). It imports nothing else of memexp."""
