# Design and reference documents shipped with the source.
EXTRA_DIST += doc/architecture.md
