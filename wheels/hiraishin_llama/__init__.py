"""hiraishin-llama: batch-invariant speculative decoding for llama.cpp, and the tools that measure it."""

try:
    from ._version import __version__
except ImportError:  # running from the source tree, not from a built wheel
    __version__ = "0+source"
