"""Reliability: bad input, faults, isolation, injection, load (issue 13)."""
