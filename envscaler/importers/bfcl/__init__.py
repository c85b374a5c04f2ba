"""`envscaler import bfcl`: BFCL's multi-turn categories from a checkout the user provides.

Nothing of BFCL is part of this repository: the checkout's files are read, its classes become
environment sources in the output catalogue, and they run only in sandboxes (the ground truth is
replayed there to find the final states the checks compare with). `envscaler import
bfcl-compare` (``fidelity``) checks the import against BFCL's own execution, and `envscaler eval
bfcl` (``evaluate``) scores a model's BFCL results by BFCL's multi-turn rules through the gateway.
"""

from envscaler.importers.bfcl.checkout import CheckoutError, locate
from envscaler.importers.bfcl.importer import BfclReport, import_bfcl

__all__ = ["BfclReport", "CheckoutError", "import_bfcl", "locate"]
