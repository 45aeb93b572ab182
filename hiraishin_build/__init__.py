"""Keeps the batch-invariant patch stack on llama.cpp and builds hiraishin-llama wheels."""

__version__ = "0.1.0"
