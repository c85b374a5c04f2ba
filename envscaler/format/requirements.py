"""An environment's third-party requirements (``requirements`` in env.json): exact pins only,
``name==version``, so the sandbox image built for a set is the same wherever it is built."""

from __future__ import annotations

import re
from collections.abc import Iterable

# A PEP 508 name and a PEP 440 version without a local label (``+...``) or a wildcard.
PIN_PATTERN = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)=="
                         r"((?:\d+!)?\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?)")


def distribution_key(name: str) -> str:
    """A distribution's name as package indexes compare it (PEP 503): ``Foo.Bar_baz`` is
    ``foo-bar-baz``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins_problem(pins: Iterable[str]) -> str | None:
    """Why ``pins`` are not a set of exact pins (one not ``name==version``, a name twice)."""
    seen: set[str] = set()
    for pin in pins:
        match = PIN_PATTERN.fullmatch(pin)
        if match is None:
            return f"{pin!r} is not an exact pin (name==version, e.g. mpmath==1.3.0)"
        if distribution_key(match[1]) in seen:
            return f"{match[1]} is pinned twice"
        seen.add(distribution_key(match[1]))
    return None


def requirement_set(pins: Iterable[str]) -> tuple[str, ...]:
    """The set as its image is keyed: each pin with its name normalized, sorted, so two
    spellings or orders of one set share an image. ``ValueError`` for pins that are not one."""
    pins = list(pins)
    problem = pins_problem(pins)
    if problem is not None:
        raise ValueError(problem)
    return tuple(sorted(f"{distribution_key(name)}=={version}"
                        for name, version in (pin.split("==") for pin in pins)))


def import_names(pins: Iterable[str]) -> frozenset[str]:
    """The top-level modules the pins let code import: each distribution's name with ``-`` and
    ``.`` as ``_`` (``mpmath``, ``typing_extensions``); a package whose module is named otherwise
    (PyYAML's ``yaml``) is not known to be one of them."""
    return frozenset(distribution_key(pin.split("==")[0]).replace("-", "_") for pin in pins)
