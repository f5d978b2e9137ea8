"""Names shared by the kernel and plugins: the "not found" answer and the keys of the group
metadata that indexing writes and queries read."""

NOT_FOUND = "Not found in the indexed documents."
# The route a query runs when it names none (engine, CLI `query`/`ask`, the HTTP server).
DEFAULT_ROUTE = "route5_unified"
MODEL_LOAD = "model_load"  # use and kind of a trace entry that is a model's loading, not a stage

INDEX_PROFILE_META = "index_profile"  # the resolved index profile the group was built with
INDEX_REPORT_META = "index_report"  # step statistics of the last index run
DOCUMENTS_META = "documents"  # {doc_id: {hash, source, title}}
FINGERPRINT_META = "index_fingerprint"  # hashes of the parse and step settings
EMBEDDER_MODEL_META = "embedder_model"  # model_id (model and runtime) of the embedder that made the vectors

# The password of the project's development Neo4j server (`make neo4j-up`, tests/neo4j_server).
# A Neo4j store on a loopback address uses it when NEO4J_PASSWORD is not set, so
# `--store neo4j` works against the dev server without exporting anything; any other host
# needs NEO4J_PASSWORD.
NEO4J_DEV_PASSWORD = "graphroute-dev"
