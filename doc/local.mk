# Design and reference documents shipped with the source; the protocol
# reference is installed with the docs too.
EXTRA_DIST += doc/architecture.md doc/gpu.md doc/shapes.md
dist_doc_DATA += doc/protocol.md
dist_doc_DATA += doc/checkpoint-format.md
dist_doc_DATA += doc/walltime.md
dist_doc_DATA += doc/python.md
dist_doc_DATA += doc/sampler.md
dist_doc_DATA += doc/shrink.md
dist_doc_DATA += doc/PERFORMANCE.md
dist_doc_DATA += doc/RELIABILITY.md
# Pages of their own for what the other pages share: the storage (URIs,
# layout, commit, S3 configuration) and the Python API.
dist_man_MANS += doc/man/dptrain-storage.7 doc/man/dptrain-python.7
