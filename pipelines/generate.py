"""Let a trained run continue a piece and write it as a MIDI file, to hear what the model learned.

    python -m pipelines.generate RUN_DIR --out FILE.mid [--prompt-tokens N] [--new-tokens M]
                                 [--temperature T] [--seed S] [--device D]

The prompt is the first N tokens of the domain's first test example. M tokens are sampled one at a time from the
model's softmax at temperature T with a seeded torch.Generator (same run, seed and device: same file). The model
sees at most its training context: once the piece is longer, the most recent tokens, starting on a multiple of
the datamodule's `window_alignment` (JSB: 4 tokens, one timestep) as its training windows do. The domain's
datamodule writes prompt + continuation with its `write_midi(tokens, path)`; a domain without one is refused.
T must be finite and at least 1e-4 (below, the scaled logits overflow), M at most 1,000,000 (a forward pass each).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from domains.fetch import FetchError
from pipelines.arguments import finite_number, whole_number
from pipelines.experiment.generation import generate_midi

MAX_NEW_TOKENS = 1_000_000  # one forward pass each; the sequence is allocated up front (8 bytes a token)
MIN_TEMPERATURE = 1e-4  # logits / T must stay finite in fp32: far below it they overflow and softmax gives NaN


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a finished run folder (manifest.json and model.pt)")
    parser.add_argument("--out", type=Path, required=True, help="MIDI file to write")
    parser.add_argument(
        "--prompt-tokens", type=whole_number(1), default=64, help="tokens of the first test example to continue"
    )
    parser.add_argument(
        "--new-tokens",
        type=whole_number(0, MAX_NEW_TOKENS),
        default=512,
        help=f"tokens to sample (<= {MAX_NEW_TOKENS})",
    )
    parser.add_argument(
        "--temperature",
        type=finite_number(MIN_TEMPERATURE),
        default=1.0,
        help=f"softmax temperature, finite, >= {MIN_TEMPERATURE:g}",
    )
    parser.add_argument("--seed", type=whole_number(0), default=0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    try:
        path = generate_midi(
            args.run, args.out, args.prompt_tokens, args.new_tokens, args.temperature, args.seed, args.device
        )
    except (ValueError, FileNotFoundError, FetchError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{path}: {args.prompt_tokens} prompt + {args.new_tokens} sampled tokens from {args.run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
