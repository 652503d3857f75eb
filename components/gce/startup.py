"""The GCE startup script's installer part: one bash script that writes the rendered installer
(components/node/installer.py) to the VM in heredocs, and runs it: byte for byte, except that lib.sh and
store.sh come without their comment lines (components/gce/shell_comments.py says why).

    render_startup_script(cfg, resolved)  -> the script; its exit code is the installer's
"""

from __future__ import annotations

import hashlib

from components import artifacts
from components.config import StackConfig
from components.gce import shell_comments
from components.node import installer

REBOOT_EXIT = installer.REBOOT_EXIT


def heredoc(target: str, text: str, tag_prefix: str) -> str:
    """`cat > TARGET <<'TAG'` with the text byte for byte; TARGET is a shell word (quoted by the caller)."""
    tag = tag_prefix + hashlib.sha256(text.encode()).hexdigest()[:12].upper()
    if tag in text:  # pragma: no cover - a 48-bit digest of the text inside the text itself
        raise ValueError(f"heredoc delimiter collides with the content of {target}")
    body = text if text.endswith("\n") else text + "\n"
    return f"cat > {target} <<'{tag}'\n{body}{tag}\n"


def _heredoc(path: str, text: str) -> str:
    return heredoc(f'"$new/{path}"', text, "DEEPEP_INSTALL_EOF_")


def render_startup_script(cfg: StackConfig, resolved: installer.Pins = None) -> str:
    """One bash script (GCE) that writes the installer to /opt/deepep/installer and runs it.

    Its exit code is the installer's: 0 ready, REBOOT_EXIT (75) a reboot was scheduled (run again after the boot), any
    other a failed phase. DEEPEP_INSTALLER_DIR moves the files (tests).
    """
    files = installer.rendered(cfg, "gce", resolved=resolved)
    # The GCE plan's files/install/gce/ comes from here (the VM gets the files only inside this script).
    # A plan renders one stack; when a process renders several configs (tests), the first one stays.
    published = artifacts.published()
    if not resolved and all(published.get(f"install/gce/{rel}", text) == text for rel, text in files.items()):
        for rel, text in files.items():
            artifacts.publish(f"install/gce/{rel}", text)
    parts = [
        "#!/bin/bash\n",
        f"# deepep-a4 installer, stack {cfg.stack} (GCE): writes the rendered installer and runs it.\n",
        f"# Exit code: the installer's (0 ready, {REBOOT_EXIT} reboot scheduled: rerun after boot, other: failed).\n",
        "set -Eeuo pipefail\numask 022\n",
        f'dir="${{DEEPEP_INSTALLER_DIR:-{installer.GCE_INSTALLER_DIR}}}"\n',
        'new="$dir.new"\n',
        'rm -rf "$new"\nmkdir -p "$new/phases" "$new/locks"\n',
    ]
    # lib.sh and store.sh without their comment lines: the script's room (components/gce/shell_comments.py).
    parts += [_heredoc(rel, text) for rel, text in shell_comments.for_gce(files).items()]
    parts += [
        'chmod 0755 "$new/run.sh"\n',
        'rm -rf "$dir"\nmv "$new" "$dir"\n',
        f'exec bash "$dir/{installer.ENTRYPOINT}" "$@"\n',
    ]
    return "".join(parts)
