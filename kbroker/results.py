"""What the handlers of metadata changes (and kbroker.config.admin) share about their per-resource results."""

from kbroker.wire.errors import ErrorCode


def mark_not_made(results, error_code: int | None) -> None:
    """A change that was not committed (the controller lost its leadership meanwhile): every result
    that said NONE carries ``error_code`` instead. None: the change was made."""
    if error_code is None:
        return
    for result in results:
        if result.error_code == ErrorCode.NONE:
            result.error_code = error_code
            if hasattr(result, "error_message"):
                result.error_message = "The metadata change was not committed."
