"""Pure decisions, stdlib only, shipped into the training container: features, ladders, verl profiles and overrides, the classifier, run state, redaction."""
