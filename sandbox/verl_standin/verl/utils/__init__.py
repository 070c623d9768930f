"""verl STAND-IN utils (sandbox only)."""
