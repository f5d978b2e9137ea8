"""``graphroute perf``: the performance figures."""
