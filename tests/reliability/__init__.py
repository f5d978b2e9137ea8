"""Reliability: bad input, faults, isolation, injection, load."""
