"""Looking at a written run: the run folder reader, timing measurements, the session picture,
the statistics report and the local viewer. Heavy imports (matplotlib) happen inside functions."""
