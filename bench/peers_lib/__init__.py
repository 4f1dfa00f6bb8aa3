"""bench/peers' modules: layout (where a file's tensors are), lossless and lossy (the
codecs, one adapter each), measure (interleaved timed rounds, peak memory) and report
(the table, CSV and SVG)."""
