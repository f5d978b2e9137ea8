"""Names shared by the kernel and plugins: the "not found" answer and the keys of the group
metadata that indexing writes and queries read."""

NOT_FOUND = "Not found in the indexed documents."

INDEX_PROFILE_META = "index_profile"  # the resolved index profile the group was built with
INDEX_REPORT_META = "index_report"  # step statistics of the last index run
DOCUMENTS_META = "documents"  # {doc_id: {hash, source, title}}
FINGERPRINT_META = "index_fingerprint"  # hashes of the parse and step settings
