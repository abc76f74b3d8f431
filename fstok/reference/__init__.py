"""Pure-Python reference implementations: the test oracles of the C runtime."""
