"""The indexing pipeline: find files, load, plan the skeleton, embed, write, run the index steps."""
