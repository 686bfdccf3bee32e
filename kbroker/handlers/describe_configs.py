"""DescribeConfigs (32): topic, broker, broker logger and group configs with their sources, synonyms, types and docs."""

from kbroker import handlers
from kbroker.config.admin import BROKER_RESOURCE, ConfigsError, config_authorization_error, describe_broker, describe_topic
from kbroker.config.group_config_admin import describe_group
from kbroker.config.loggers import BROKER_LOGGER_RESOURCE, describe_loggers
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import REFUSAL_MESSAGES
from kbroker.metadata.image import GROUP_RESOURCE, TOPIC_RESOURCE
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DescribeConfigsResponse = API_BY_NAME["DescribeConfigs"].response_class
Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym


@handlers.handles("DescribeConfigs", 1, 4)
async def handle(broker, context, request):
    results = []
    for resource in request.resources:
        keys = list(resource.configuration_keys) if resource.configuration_keys else None
        refused = config_authorization_error(broker, context, AclOperation.DESCRIBE_CONFIGS, resource.resource_type,
                                             resource.resource_name)
        try:
            if refused is not None:
                raise ConfigsError(refused, REFUSAL_MESSAGES.get(refused))
            if resource.resource_type == TOPIC_RESOURCE:
                entries = describe_topic(broker.config_layers, broker.image, resource.resource_name, keys)
            elif resource.resource_type == BROKER_RESOURCE:
                entries = describe_broker(broker.config_layers, broker.node_id, resource.resource_name, keys)
            elif resource.resource_type == GROUP_RESOURCE:
                entries = describe_group(broker.config_layers, broker.image, resource.resource_name, keys)
            elif resource.resource_type == BROKER_LOGGER_RESOURCE:
                entries = describe_loggers(broker.node_id, resource.resource_name, keys)
            else:
                raise ConfigsError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource.resource_type}")
        except ConfigsError as error:
            results.append(Result(error_code=error.error_code, error_message=error.message, configs=[],
                                  resource_type=resource.resource_type, resource_name=resource.resource_name))
            continue
        # A logger's documentation is always "", asked for or not, as Kafka's (it never sets the field).
        documented = request.include_documentation or resource.resource_type == BROKER_LOGGER_RESOURCE
        configs = [
            Entry(
                name=entry.name, value=entry.value, read_only=entry.read_only, config_source=entry.source,
                is_sensitive=entry.sensitive, config_type=entry.config_type,
                synonyms=[Synonym(name=s.name, value=s.value, source=s.source) for s in entry.synonyms]
                if request.include_synonyms else [],
                documentation=entry.documentation if documented else None,
            )
            for entry in entries
        ]
        results.append(Result(error_code=ErrorCode.NONE, resource_type=resource.resource_type,
                              resource_name=resource.resource_name, configs=configs))
    return DescribeConfigsResponse(results=results)
