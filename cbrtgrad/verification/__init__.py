"""Verification: the case table, ulp measurement against mpmath and scipy, and
the exhaustive float32 sweep."""
