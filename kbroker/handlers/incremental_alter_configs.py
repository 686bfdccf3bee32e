"""IncrementalAlterConfigs (44): SET, DELETE, APPEND and SUBTRACT on a topic's overrides, a broker's
dynamic configs or a group's configs."""

from kbroker import handlers
from kbroker.config.admin import (BROKER_RESOURCE, alter_authorized, alter_resources, check_broker_change,
                             plan_incremental_alter, refuse_resources)
from kbroker.config.group_config_admin import plan_group_change
from kbroker.metadata.image import GROUP_RESOURCE
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

IncrementalAlterConfigsResponse = API_BY_NAME["IncrementalAlterConfigs"].response_class
Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


def _refusal(request, code: int = ErrorCode.NOT_CONTROLLER):
    return IncrementalAlterConfigsResponse(responses=refuse_resources(request.resources, Result, code))


@handlers.handles("IncrementalAlterConfigs", 0, 1)
async def handle(broker, context, request):
    """A broker checks a change to broker configs itself (Kafka's ConfigAdminManager.preprocess) before
    it makes or forwards it."""
    def check(resource):
        if resource.resource_type == BROKER_RESOURCE:
            operations = [(config.name, config.config_operation, config.value) for config in resource.configs]
            check_broker_change(broker.static_config, broker.image, broker.node_id, broker.listener_protocols,
                                resource.resource_name, operations, legacy=False)

    return await alter_authorized(broker, context, request, _alter, IncrementalAlterConfigsResponse, Result, check)


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
