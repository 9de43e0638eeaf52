"""Demo and test project for the deuz_transcripts app."""
