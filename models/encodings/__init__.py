"""Positional encodings: one file per encoding, found by the registry in `base`."""

from models.encodings.base import PositionalEncoding, available, build_encoding, encoding_class, register

__all__ = ["PositionalEncoding", "available", "build_encoding", "encoding_class", "register"]
