"""Broker loggers (KIP-412): DescribeConfigs and IncrementalAlterConfigs of a BROKER_LOGGER resource, over
kbroker's Python loggers under Log4j's level names.

Kafka is the reference (``ConfigHelper``, ``ConfigAdminManager.validateLogLevelConfigs``,
``Log4jController``): the resource is one broker's own (named by its node id), its configs are its
loggers (``root`` and every logger the broker has made, ``kbroker.*``) with their effective levels,
source DYNAMIC_BROKER_LOGGER_CONFIG; a change sets a logger's level (SET) or gives it back to its parent
(DELETE), is made on the broker it is sent to and never forwarded, and lasts until the process ends.
"""

from __future__ import annotations

import logging

from kbroker.config.admin import APPEND, DELETE, SET, SUBTRACT, ConfigEntry, ConfigsError
from kbroker.wire.errors import ErrorCode

BROKER_LOGGER_RESOURCE = 8
DYNAMIC_BROKER_LOGGER_CONFIG = 6
ROOT = "root"
TRACE = 5  # below Python's DEBUG, as Log4j's TRACE
LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}  # Kafka's LogLevelConfig.VALID_LOG_LEVELS
_OPERATION_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def level_name(level: int) -> str:
    """A Python level as Log4j names it (the nearest at or above it)."""
    return next((name for name, value in LEVELS.items() if level <= value), "FATAL")


def loggers() -> dict[str, logging.Logger]:
    """``root`` and the broker's loggers, by name."""
    found = {ROOT: logging.getLogger()}
    for name, logger in sorted(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and (name == "kbroker" or name.startswith("kbroker.")):
            found[name] = logger
    return found


def check_resource(resource_name: str, node_id: int, empty_message: str, other_message: str) -> None:
    """INVALID_REQUEST unless ``resource_name`` is this broker's id (the messages differ by API, as Kafka's)."""
    if not resource_name and empty_message:
        raise ConfigsError(ErrorCode.INVALID_REQUEST, empty_message)
    try:
        named = int(resource_name)
    except ValueError:
        raise ConfigsError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {resource_name}"
                           if empty_message else f"Node id must be an integer, but it is: {resource_name}") from None
    if named != node_id:
        raise ConfigsError(ErrorCode.INVALID_REQUEST, other_message.format(expected=node_id, received=resource_name))


def describe_loggers(node_id: int, resource_name: str, keys: list[str] | None) -> list[ConfigEntry]:
    check_resource(resource_name, node_id, "Broker id must not be empty",
                   "Unexpected broker id, expected {expected} but received {received}")
    return [ConfigEntry(name, level_name(logger.getEffectiveLevel()), DYNAMIC_BROKER_LOGGER_CONFIG, read_only=False,
                        sensitive=False, config_type=0, documentation="", synonyms=())
            for name, logger in loggers().items() if not keys or name in keys]


def alter_loggers(node_id: int, resource_name: str, operations: list[tuple[str, int, str | None]],
                  validate_only: bool) -> None:
    """Check every operation, then (unless ``validate_only``) make them; ConfigsError for the first refused."""
    check_resource(resource_name, node_id, "", "Unexpected node id. Expected {expected}, but received {received}")
    known = loggers()
    for name, operation, value in operations:
        if name not in known:
            raise ConfigsError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
        if operation in _OPERATION_NAMES:
            raise ConfigsError(ErrorCode.INVALID_REQUEST,
                               f"{_OPERATION_NAMES[operation]} operation is not allowed for the BROKER_LOGGER resource")
        if operation == SET and value not in LEVELS:
            raise ConfigsError(ErrorCode.INVALID_CONFIG, f"Cannot set the log level of {name} to {value} as it is not "
                                                         f"a supported log level. Valid log levels are "
                                                         f"{', '.join(sorted(LEVELS))}")
        if operation == DELETE and name == ROOT:
            raise ConfigsError(ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
    if validate_only:
        return
    for name, operation, value in operations:
        known[name].setLevel(LEVELS[value] if operation == SET else logging.NOTSET)
