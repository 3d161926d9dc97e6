"""Replay, hindsight relabelling, prototypes: all stored as preallocated torch tensors."""
