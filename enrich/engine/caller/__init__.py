"""The caller's side of an operator run: the consumer's non-blocking core and the two
drivers that wait for it (on a thread, or on the loop)."""
