"""The deuz_transcripts benchmark: ``python -m bench --help``; results in ``bench/RESULTS.md``."""
