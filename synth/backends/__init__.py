"""Backends behind small interfaces: planners, TTS engines (and later rooms, LLMs)."""
