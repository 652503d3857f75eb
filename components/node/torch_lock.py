"""The host-install PyTorch from a locked requirements file: every wheel by sha256 (pip --require-hashes).

`components.config.versions.TORCH_LOCKS` names the lock of each torchVersion that has one; the files lie
under scripts/install/locks/ and ship with the pytorch phase (scripts/payload.py). config.sh carries the
stack's as TORCH_LOCK (a path under the installer folder, "" without one); the phase then installs exactly
that file. Without a lock config refuses a host-install stack unless the store's artifact brings PyTorch
(components/config/rules/version_forms.py).
"""

from __future__ import annotations

from components.config import StackConfig, versions
from scripts import payload


def lock_path(cfg: StackConfig) -> str:
    """The stack's lock as config.sh names it (relative to the installer folder), or ""."""
    name = versions.TORCH_LOCKS.get(cfg.versions.torch, "")
    return f"{payload.TORCH_LOCKS_DIR}/{name}" if name else ""


def lock_text(cfg: StackConfig) -> str:
    """The lock file's text, or "" without one."""
    path = lock_path(cfg)
    return payload.torch_locks().get(path, "") if path else ""
