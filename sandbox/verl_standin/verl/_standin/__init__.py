"""Implementation of the verl STAND-IN (dapo-ops sandbox / test equipment only). Not the real verl."""
