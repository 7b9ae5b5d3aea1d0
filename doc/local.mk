# doc: the protocol reference is distributed and installed with the docs.
dist_doc_DATA += doc/protocol.md
