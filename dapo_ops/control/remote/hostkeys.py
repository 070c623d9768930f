"""Host-key verification helpers of :class:`dapo_ops.control.remote.target.Target`: OpenSSH's ``accept-new`` as a
paramiko ``MissingHostKeyPolicy`` (``paramiko/client.py``); ``RejectPolicy`` is paramiko's own. A *changed* key is
always refused (paramiko raises ``BadHostKeyException`` before consulting the policy).
"""

from __future__ import annotations

import threading
from pathlib import Path

from dapo_ops.control.remote.errors import fingerprint

_known_hosts_lock = threading.Lock()


def accept_new_policy(path: Path, target):
    """OpenSSH ``accept-new``: remember an unknown host's key and append it to known_hosts (a changed key is
    still rejected: paramiko raises BadHostKeyException before consulting the policy). A paramiko
    ``MissingHostKeyPolicy``, defined on first use (paramiko is imported only for a direct connection)."""
    import paramiko

    class _AcceptNewPolicy(paramiko.MissingHostKeyPolicy):
        def missing_host_key(self, client, hostname, key):
            client.get_host_keys().add(hostname, key.get_name(), key)
            line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
            with _known_hosts_lock:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                with open(path, "a", encoding="ascii") as fh:
                    fh.write(line)
            target.added_host_key = f"{key.get_name()} {fingerprint(key)}"

    return _AcceptNewPolicy()
