"""Composing configs and turning them into objects; shared by every pipeline and by the tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from domains.base import SequenceDataModule
from models.encodings import encoding_class

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


def compose_config(overrides: Sequence[str] = (), name: str = "train") -> DictConfig:
    """The config a command line with these overrides would get, without a command line."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(name, overrides=list(overrides))


def config_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def roster(name: str) -> list[str]:
    path = CONFIG_DIR / "roster" / f"{name}.yaml"
    if not path.exists():
        raise ValueError(f"unknown roster {name!r}; valid: {', '.join(config_options('roster'))}")
    entries = list(OmegaConf.load(path).entries)
    unknown = [e for e in entries if e not in config_options("pe")]
    if unknown:
        raise ValueError(f"{path}: entries {unknown} have no config in configs/pe/")
    return entries


def model_config(cfg: DictConfig, vocab_size: int) -> dict[str, Any]:
    if encoding_class(cfg.pe.name).evaluation_only:  # unknown names fail here too, before any data or training
        raise ValueError(
            f"encoding {cfg.pe.name!r} is applied at evaluation time to a trained model, not trained; "
            "train pe=rope10k (or rope500k): its runs are also evaluated with YaRN on the longer splits"
        )
    return {
        **OmegaConf.to_container(cfg.model, resolve=True),
        "vocab_size": vocab_size,
        "pe": cfg.pe.name,
        "pe_options": OmegaConf.to_container(cfg.pe.options, resolve=True),
    }


def build_datamodule(cfg: DictConfig) -> SequenceDataModule:
    cls = get_class(cfg.domain.datamodule)
    if not (isinstance(cls, type) and issubclass(cls, SequenceDataModule)):
        raise TypeError(f"domain {cfg.domain.name}: {cfg.domain.datamodule} is not a SequenceDataModule")
    return cls(
        context=cfg.model.context,
        batch_size=cfg.trainer.batch_size,
        eval_batch_size=cfg.trainer.eval_batch_size,
        seed=cfg.seed,
        num_workers=cfg.trainer.num_workers,
        **OmegaConf.to_container(cfg.domain.args, resolve=True),
    )


def run_dir(cfg: DictConfig) -> Path:
    """runs/<domain>[/<task>]/<pe id>/seed<k>: deterministic, so a re-run or a requeued job finds its checkpoint."""
    parts = [cfg.domain.name]
    task = cfg.domain.args.get("task")
    if task:
        parts.append(str(task))
    return Path(cfg.runs_root).joinpath(*parts, cfg.pe.id, f"seed{cfg.seed}")
