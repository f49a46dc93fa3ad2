"""memexp's Hydra configs, found by module (`pkg://memexp.conf`) so that they ship in the wheel."""
