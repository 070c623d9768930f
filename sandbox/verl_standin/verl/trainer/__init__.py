"""verl STAND-IN package (dapo-ops sandbox); the config/ yaml next to it is the real verl 0.9.1 yaml."""
