"""IncrementalAlterConfigs (44): SET, DELETE, APPEND and SUBTRACT on a topic's overrides."""

from kbroker import handlers
from kbroker.configs import alter_authorized, alter_resources, refuse_resources, plan_incremental_alter
from wire.schema import API_BY_NAME

IncrementalAlterConfigsResponse = API_BY_NAME["IncrementalAlterConfigs"].response_class


def _refusal(request):
    return IncrementalAlterConfigsResponse(responses=refuse_resources(request.resources, IncrementalAlterConfigsResponse.AlterConfigsResourceResponse))


@handlers.handles("IncrementalAlterConfigs", 0, 1)
async def handle(broker, context, request):
    return await alter_authorized(broker, context, request, _alter, IncrementalAlterConfigsResponse,
                                  IncrementalAlterConfigsResponse.AlterConfigsResourceResponse)


@handlers.metadata_change(_refusal)
async def _alter(broker, context, request):
    def plan_for(image, resource):
        operations = [(config.name, config.config_operation, config.value) for config in resource.configs]
        return plan_incremental_alter(
            broker.config, image, broker.node_id, resource.resource_type, resource.resource_name, operations
        )

    result_class = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    results = await alter_resources(broker, request.resources, plan_for, result_class, request.validate_only)
    return IncrementalAlterConfigsResponse(responses=results)
