"""The inventory: ``hosts.toml``, who the hosts are and how to reach each one's container.

Modules: :mod:`~dapo_ops.control.inventory.hosts_file` (``hosts.toml`` -> :class:`~dapo_ops.control.inventory.hosts_file.Inventory`,
host selection, ad hoc ``-H user@host:port`` hosts, key files), :mod:`~dapo_ops.control.inventory.model` (the file's
msgspec model and its JSON Schema), :mod:`~dapo_ops.control.inventory.proxy` (the proxy environment of the training
container) and :mod:`~dapo_ops.control.inventory.container_spec` (what a host's training container needs and its
``docker run`` argv). Nothing is re-exported here: import from the module that defines a name.
"""
