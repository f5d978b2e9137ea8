"""``graphroute serve``: the HTTP API."""
