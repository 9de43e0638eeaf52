"""PostgreSQL: a ``tsvector`` of Python's terms per message, searched through GIN (``engine``), with stored term counts (``counts``)."""
