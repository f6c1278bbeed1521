"""Composing configs and turning them into objects: the domains, rosters, datamodules and model configs that
every pipeline and the tests build from `configs/`.

The config groups are the single source of each list: the domains are the files of `configs/domain/` (in the
order their `order` key gives: paper 000's Figure 3 columns), the encodings those of `configs/pe/`, the rosters
those of `configs/roster/`.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from domains.base import SequenceDataModule
from domains.stored import StoredDataModule
from models.encodings import PositionalEncoding, build_encoding, encoding_class

CONFIG_DIR = Path(__file__).resolve().parent.parent.parent / "configs"


def compose_config(overrides: Sequence[str] = (), name: str = "train") -> DictConfig:
    """The config a command line with these overrides would get, without a command line."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(name, overrides=list(overrides))


def override_value(value: Any) -> str:
    """A config value as a Hydra override writes it. A string is quoted, its quotes escaped (and the backslashes
    before one, or before the closing quote, doubled: Hydra's grammar) and `${` escaped (no interpolation), so that
    a path with a space, a quote, a comma, brackets or a letter outside ASCII (`résumé/runs`) stays one string, and
    `true` or `1e-3` stay strings."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ",".join(override_value(v) for v in value) + "]"
    if isinstance(value, str):
        escaped = re.sub(r"(\\*)\$\{", lambda m: m[1] * 2 + "\\${", value)
        escaped = re.sub(r"(\\*)'", lambda m: m[1] * 2 + "\\'", escaped)
        return "'" + re.sub(r"(\\+)$", lambda m: m[1] * 2, escaped) + "'"
    return str(value)


def config_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


@cache
def _domain_config(domain: str) -> DictConfig:
    path = CONFIG_DIR / "domain" / f"{domain}.yaml"
    if not path.exists():
        raise ValueError(f"unknown domain {domain!r}; valid: {', '.join(config_options('domain'))}")
    return OmegaConf.load(path)


def domain_names() -> list[str]:
    """Every domain with a config, in the order of their `order` key."""
    return sorted(config_options("domain"), key=lambda name: (_domain_config(name).get("order", 1_000), name))


def datamodule_class(domain: str, path: str | None = None) -> type[SequenceDataModule]:
    """The DataModule class of a domain: `path` (a composed config's domain.datamodule), by default the one its
    config file names. The class carries the domain's metric, tasks and store."""
    path = path or _domain_config(domain).datamodule
    cls = get_class(path)
    if not (isinstance(cls, type) and issubclass(cls, SequenceDataModule)):
        raise TypeError(f"domain {domain}: {path} is not a SequenceDataModule")
    return cls


def stored_domain_names() -> list[str]:
    """The domains prepared from raw files into a token store (`make data-<domain>`)."""
    return [name for name in domain_names() if issubclass(datamodule_class(name), StoredDataModule)]


def roster(name: str) -> list[str]:
    """The encodings (configs/pe ids) a roster file lists."""
    path = CONFIG_DIR / "roster" / f"{name}.yaml"
    if not path.exists():
        raise ValueError(f"unknown roster {name!r}; valid: {', '.join(config_options('roster'))}")
    encodings = list(OmegaConf.load(path).entries)
    unknown = [e for e in encodings if e not in config_options("pe")]
    if unknown:
        raise ValueError(f"{path}: entries {unknown} have no config in configs/pe/")
    return encodings


def encoding_name(name: str) -> str:
    """An argparse `type` for --encodings: a configs/pe id, else an error naming it. A Hydra override (key=value)
    written after --encodings is read as one more name (nargs="+"); said so, since otherwise a design would be fixed
    with it as an encoding and its runs trained without it."""
    if name in config_options("pe"):
        return name
    hint = (
        "; a Hydra override after --encodings is read as an encoding: put overrides before --encodings or after --"
        if "=" in name
        else f"; valid: {', '.join(config_options('pe'))}"
    )
    raise argparse.ArgumentTypeError(f"{name!r} is not an encoding (configs/pe/){hint}")


def describe_roster(name: str, domain: str, preset: str) -> list[dict]:
    """Each encoding of a roster as built at the domain and preset's model size: {"id", **describe()} (mechanism,
    fused attention, parameters, bands: what a run's manifest records under "encoding")."""
    rows = []
    for encoding in roster(name):
        module = encoding_of(compose_config([f"domain={domain}", f"preset={preset}", f"pe={encoding}"]))
        rows.append({"id": encoding, **module.describe()})
    return rows


def encoding_of(cfg: DictConfig) -> PositionalEncoding:
    """The encoding a composed run config describes, built at its model size (without the model around it)."""
    return build_encoding(
        cfg.pe.name,
        OmegaConf.to_container(cfg.pe.options, resolve=True),
        n_layer=cfg.model.n_layer,
        n_head=cfg.model.n_head,
        d_model=cfg.model.d_model,
        context=cfg.model.context,
    )


def model_config(cfg: DictConfig, vocab_size: int) -> dict[str, Any]:
    """GPTConfig's fields for a composed run config: the model group, the vocabulary and the encoding's
    implementation (cfg.pe.name) with its options."""
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
    return datamodule_class(cfg.domain.name, cfg.domain.datamodule)(
        context=cfg.model.context,
        batch_size=cfg.trainer.batch_size,
        eval_batch_size=cfg.trainer.eval_batch_size,
        seed=cfg.seed,
        num_workers=cfg.trainer.num_workers,
        worker_method=cfg.trainer.worker_method,
        **OmegaConf.to_container(cfg.domain.args, resolve=True),
    )


def stored_datamodule(domain: str, overrides: Sequence[str] = ()) -> StoredDataModule:
    """The datamodule of a domain prepared from raw files, as its config (plus overrides) builds it."""
    dm = build_datamodule(compose_config([f"domain={domain}", *overrides]))
    if not isinstance(dm, StoredDataModule):
        raise ValueError(f"domain {domain!r} is generated on the fly: it has no store")
    return dm
