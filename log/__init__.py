"""One partition's on-disk storage (lands with the log issue)."""
