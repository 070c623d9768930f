"""verl STAND-IN (dapo-ops sandbox / test equipment only). Not the real verl."""

__version__ = "0.9.1"
