"""The shared decoder, its positional encodings and the training module."""
