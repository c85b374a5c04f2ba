"""Sandboxes of other nodes: a sandbox host serves its node's sandboxes over authenticated TCP
(``host``), gateways reach them through ``envscaler.sandbox.backends.remote`` and find hosts in Redis
(``registry``). Unix sockets never leave their node."""
