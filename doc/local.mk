# Design and reference documents shipped with the source; the protocol
# reference is installed with the docs too.
EXTRA_DIST += doc/architecture.md
dist_doc_DATA += doc/protocol.md
dist_doc_DATA += doc/checkpoint-format.md
dist_doc_DATA += doc/walltime.md
dist_doc_DATA += doc/python.md
dist_doc_DATA += doc/sampler.md
