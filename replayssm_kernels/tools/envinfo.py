"""``env.json`` beside every results CSV: versions, device, git state, config hash, time, command."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import torch

from ..configs import CONFIG_DIR


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def git_state() -> dict:
    """SHA and dirty flag. ``REPLAYSSM_GIT_SHA`` wins when set: the GPU machine receives a copy of the
    working tree whose ``.git`` can lag behind it, so the launching script names the commit it sent."""
    if os.environ.get("REPLAYSSM_GIT_SHA"):
        return {"git_sha": os.environ["REPLAYSSM_GIT_SHA"], "git_dirty": None}
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True)
        return {"git_sha": sha.stdout.strip(), "git_dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.CalledProcessError):
        return {"git_sha": os.environ.get("REPLAYSSM_GIT_SHA", "unknown"), "git_dirty": None}


def configs_hash() -> str:
    h = hashlib.sha256()
    for path in sorted(CONFIG_DIR.glob("*.json")):
        h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()[:16]


def environment(config: dict | None = None) -> dict:
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    return {
        "utc_time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "helion": _version("helion"),
        "triton": _version("triton"),
        "fla_core": _version("fla-core"),
        "cuda": torch.version.cuda,
        "gpu": gpu,
        "host": platform.node(),
        **git_state(),
        "configs_sha256_16": configs_hash(),
        "config": config or {},
    }


def write_env_json(path: Path, config: dict | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(environment(config), indent=1, default=str) + "\n")
