"""Sandboxes: generated code runs only here.

`envscaler.sandbox.runtime` is copied into the sandbox image and uses the standard library alone, so this
file must stay free of imports.
"""
