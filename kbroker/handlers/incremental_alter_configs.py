"""IncrementalAlterConfigs (44): SET, DELETE, APPEND and SUBTRACT on a topic's overrides, a broker's
dynamic configs or a group's configs; SET and DELETE on a broker's loggers (kbroker/config/loggers.py)."""

from kbroker import handlers
from kbroker.config.admin import (APPEND, BROKER_RESOURCE, DELETE, SET, SUBTRACT, ConfigsError, alter_authorized,
                                  alter_resources, check_broker_change, check_change_form, config_authorization_error,
                                  plan_incremental_alter, refuse_resources)
from kbroker.config.group_config_admin import plan_group_change
from kbroker.config.loggers import BROKER_LOGGER_RESOURCE, alter_loggers
from kbroker.security.acls import AclOperation
from kbroker.metadata.image import GROUP_RESOURCE
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

IncrementalAlterConfigsResponse = API_BY_NAME["IncrementalAlterConfigs"].response_class
Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
OPERATIONS = (SET, DELETE, APPEND, SUBTRACT)


def _refusal(request, code: int = ErrorCode.NOT_CONTROLLER):
    return IncrementalAlterConfigsResponse(responses=refuse_resources(request.resources, Result, code))


@handlers.handles("IncrementalAlterConfigs", 0, 1)
async def handle(broker, context, request):
    """A broker checks a change itself (Kafka's ConfigAdminManager.preprocess) before it makes or forwards
    it: of any resource, an operation that is none (UNKNOWN_SERVER_ERROR, no message: Kafka's OpType.forId
    fails), a name given twice and a null value but to DELETE (INVALID_REQUEST); of a broker, the rest."""
    def check(resource):
        operations = _operations(resource)
        if resource.resource_type == BROKER_RESOURCE:
            check_broker_change(broker.static_config, broker.image, broker.node_id, broker.listener_protocols,
                                resource.resource_name, operations, legacy=False)

    asked = request.resources
    loggers = {id(resource): _alter_loggers(broker, context, resource, request.validate_only)
               for resource in asked if resource.resource_type == BROKER_LOGGER_RESOURCE}
    if not loggers:
        return await alter_authorized(broker, context, request, _alter, IncrementalAlterConfigsResponse, Result, check)
    request.resources = [resource for resource in asked if id(resource) not in loggers]
    response = (await alter_authorized(broker, context, request, _alter, IncrementalAlterConfigsResponse, Result, check)
                if request.resources else IncrementalAlterConfigsResponse(responses=[]))
    others = iter(response.responses)
    response.responses = [loggers[id(resource)] if id(resource) in loggers else next(others) for resource in asked]
    return response


def _operations(resource) -> list[tuple[str, int, str | None]]:
    """The resource's (name, operation, value) changes; ConfigsError for a malformed set (any resource)."""
    operations = [(config.name, config.config_operation, config.value) for config in resource.configs]
    if any(operation not in OPERATIONS for _, operation, _ in operations):
        raise ConfigsError(ErrorCode.UNKNOWN_SERVER_ERROR)
    check_change_form(operations, legacy=False)
    return operations


def _alter_loggers(broker, context, resource, validate_only: bool):
    """A broker's loggers are its own: changed here, never forwarded (Kafka's ConfigAdminManager)."""
    code = config_authorization_error(broker, context, AclOperation.ALTER_CONFIGS, resource.resource_type,
                                      resource.resource_name)
    try:
        if code is not None:
            raise ConfigsError(code)
        alter_loggers(broker.node_id, resource.resource_name, _operations(resource), validate_only)
    except ConfigsError as error:
        return Result(error_code=error.error_code, error_message=error.message, resource_type=resource.resource_type,
                      resource_name=resource.resource_name)
    return Result(error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                  resource_name=resource.resource_name)


async def handle_forwarded(controller, context, request):
    """On the controller: the broker that forwarded the request has checked its broker resources."""
    return await alter_authorized(controller, context, request, _alter, IncrementalAlterConfigsResponse, Result)


@handlers.metadata_change(_refusal)
async def _alter(broker, context, request):
    def plan_for(image, resource):
        operations = [(config.name, config.config_operation, config.value) for config in resource.configs]
        if resource.resource_type == GROUP_RESOURCE:
            return plan_group_change(broker.config, image, resource.resource_name, operations, legacy=False)
        return plan_incremental_alter(
            broker.config, image, broker.node_id, resource.resource_type, resource.resource_name, operations
        )

    results = await alter_resources(broker, request.resources, plan_for, Result, request.validate_only)
    return IncrementalAlterConfigsResponse(responses=results)
