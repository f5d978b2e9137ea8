"""The kernel's stable API: what plugins implement and use (models, the stage contract,
component contracts, the store protocol, shared constants). It imports nothing else from
graphroute but :mod:`graphroute.core.errors`."""
