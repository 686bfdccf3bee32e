"""AlterConfigs (33): replace a topic's whole set of overrides; broker settings are static here."""

from kbroker import handlers
from kbroker.configs import ConfigsError, plan_alter
from kbroker.metadata.image import apply_record
from wire.errors import ErrorCode
from wire.schema import API_BY_NAME

AlterConfigsResponse = API_BY_NAME["AlterConfigs"].response_class
Result = AlterConfigsResponse.AlterConfigsResourceResponse


@handlers.handles("AlterConfigs", 0, 2)
async def handle(broker, context, request):
    results, plans = [], []
    image = broker.image  # with the changes planned so far, so one request can name a topic twice
    for resource in request.resources:
        wanted = {config.name: config.value for config in resource.configs}
        try:
            plan = plan_alter(broker.config, image, broker.settings.node_id, resource.resource_type,
                              resource.resource_name, wanted)
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
    return AlterConfigsResponse(responses=results)
