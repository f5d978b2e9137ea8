"""Applications built on the kernel: the command line, the HTTP server, benchmarks,
performance figures, the docs generator and the plugin scaffold."""
