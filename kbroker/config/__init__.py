"""The broker's settings in one place, under Kafka's names.

- ``definitions``: every setting (name, type, default, validator, the environment variable);
- ``topic_definitions``: every topic config of Kafka 4.4 (type, rules; the defaults of those with no
  broker synonym);
- ``sources``: where values come from, lowest first: the defaults, a server.properties file,
  ``KBROKER_*`` variables, ``--override`` (``properties`` reads the file's Java syntax);
- ``broker_config``: ``BrokerConfig``, the typed and validated result, listeners and the quorum;
- ``dynamic``: broker configs changed at runtime, laid over the static ones (Kafka's DynamicBrokerConfig);
- ``admin``: DescribeConfigs and (Incremental)AlterConfigs of topics and brokers;
- ``loggers``: the broker loggers (BROKER_LOGGER resources, KIP-412) over Python's loggers;
- ``group_configs``: per-group configs (GROUP resources) and what coordinators read of them;
  ``group_config_admin``: their DescribeConfigs and (Incremental)AlterConfigs;
- ``client``: the admin commands' client properties (``--command-config``).
"""

from kbroker.config.broker_config import BrokerConfig
from kbroker.config.errors import ConfigError

__all__ = ["BrokerConfig", "ConfigError"]
