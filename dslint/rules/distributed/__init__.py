"""Distributed data correctness (DSL7xx): data that is split, sharded, padded or placed
so that under DDP (several ranks, one process each) ranks see the wrong samples.

DSL701 random_split that differs per rank (or between two hooks), DSL702 a training
loader that every rank iterates in full, DSL703 an iterable stream not split by rank,
DSL704 a padding ``DistributedSampler`` under gathered evaluation, DSL705 CUDA tensors
in a dataset that forked workers index. The facts they share (does the file run under
a process group, rank expressions, seeds, gathers) are ``dslint.semantics.distributed``.
"""
