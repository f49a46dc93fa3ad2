"""memexp's own Triton kernels, each beside its PyTorch reference (imported as memexp.kernels)."""
