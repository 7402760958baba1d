"""duplexsynth: synthetic two-channel training data for full-duplex spoken dialogue models."""

__version__ = "0.1.0"
