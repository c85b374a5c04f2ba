"""What can go wrong with one item of a stage, and how the run treats it."""


class ParseError(Exception):
    """A reply that cannot be used; the message is told to the model on the next attempt."""


class ItemDropped(Exception):
    """An item of a stage is given up, for the reason in the message (kept in the run report)."""


class TransientFailure(Exception):
    """The model endpoint or the sandbox infrastructure failed for this item; it is not recorded
    as finished, so a later run tries it again."""


class SynthAbort(Exception):
    """A failure that no retry fixes (bad credentials, unknown model, missing recorded reply)."""
