"""`envscaler import tau-bench` and `envscaler eval tau-bench`: tau-bench's retail and airline
domains from a checkout the user provides.

Nothing of tau-bench is part of this repository: the checkout's files are read (with ``ast``,
never imported), its tools become environment sources in the output catalogue, and they run only
in sandboxes.
"""

from envscaler.importers.tau_bench.checkout import CheckoutError
from envscaler.importers.tau_bench.importer import TauReport, import_tau_bench

__all__ = ["CheckoutError", "TauReport", "import_tau_bench"]
