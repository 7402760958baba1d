"""Noise, babble, media and non-verbal sound banks: generated locally or loaded from folders."""
