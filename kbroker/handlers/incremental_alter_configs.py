"""IncrementalAlterConfigs (44): SET, DELETE, APPEND and SUBTRACT on a topic's overrides."""

from kbroker import handlers
from kbroker.configs import ConfigsError, plan_incremental_alter
from kbroker.metadata.image import apply_record
from wire.errors import ErrorCode
from wire.schema import API_BY_NAME

IncrementalAlterConfigsResponse = API_BY_NAME["IncrementalAlterConfigs"].response_class
Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


@handlers.handles("IncrementalAlterConfigs", 0, 1)
async def handle(broker, context, request):
    results, plans = [], []
    image = broker.image  # with the changes planned so far, so one request can name a topic twice
    for resource in request.resources:
        operations = [(config.name, config.config_operation, config.value) for config in resource.configs]
        try:
            plan = plan_incremental_alter(broker.config, image, broker.settings.node_id,
                                          resource.resource_type, resource.resource_name, operations)
        except ConfigsError as error:
            results.append(Result(error_code=error.error_code, error_message=error.message,
                                  resource_type=resource.resource_type, resource_name=resource.resource_name))
            continue
        results.append(Result(error_code=ErrorCode.NONE, resource_type=resource.resource_type,
                              resource_name=resource.resource_name))
        plans.extend(plan)
        for record in plan:
            image = apply_record(image, record)
    if plans and not request.validate_only:
        broker.commit(plans)
    return IncrementalAlterConfigsResponse(responses=results)
