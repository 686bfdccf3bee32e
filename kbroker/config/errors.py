"""The one error of configuration: a setting unknown, malformed or inconsistent with others."""

from __future__ import annotations


class ConfigError(ValueError):
    """A setting is unknown, malformed or inconsistent with others."""

    def __init__(self, message: str, setting: str | None = None, value: str | None = None, origin=None) -> None:
        super().__init__(message)
        self.setting, self.value, self.origin = setting, value, origin
