"""dslint: find the bugs that make PyTorch data pipelines leak, stall, repeat or crash."""

__version__ = "0.1.0"
