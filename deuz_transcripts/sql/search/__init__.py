"""The search half of the SQL index, engine-agnostic: statistics, walks, the
essential-terms plan, page rows and the one collector that assembles them
(``collector`` says how). Engine SQL lives in ``deuz_transcripts.backends``."""

from .collector import Collected, Collector, Count

__all__ = ["Collected", "Collector", "Count"]
