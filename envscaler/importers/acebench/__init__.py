"""`envscaler import acebench`: ACEBench's agent category (multi-step, multi-turn) from a
checkout the user provides.

Nothing of ACEBench is part of this repository: the checkout's files are read (with ``ast`` and
``json``, never imported), its classes become environment sources in the output catalogue, and
they run only in sandboxes.
"""

from envscaler.importers.acebench.checkout import CheckoutError
from envscaler.importers.acebench.importer import AceReport, import_acebench

__all__ = ["AceReport", "CheckoutError", "import_acebench"]
