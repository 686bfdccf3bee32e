"""AlterConfigs (33): replace a topic's whole set of overrides; broker settings are static here."""

from kbroker import handlers
from kbroker.configs import alter_authorized, alter_resources, refuse_resources, plan_alter
from wire.schema import API_BY_NAME

AlterConfigsResponse = API_BY_NAME["AlterConfigs"].response_class


def _refusal(request):
    return AlterConfigsResponse(responses=refuse_resources(request.resources, AlterConfigsResponse.AlterConfigsResourceResponse))


@handlers.handles("AlterConfigs", 0, 2)
async def handle(broker, context, request):
    return await alter_authorized(broker, context, request, _alter, AlterConfigsResponse,
                                  AlterConfigsResponse.AlterConfigsResourceResponse)


@handlers.metadata_change(_refusal)
async def _alter(broker, context, request):
    def plan_for(image, resource):
        wanted = {config.name: config.value for config in resource.configs}
        return plan_alter(broker.config, image, broker.node_id, resource.resource_type, resource.resource_name, wanted)

    results = await alter_resources(broker, request.resources, plan_for, AlterConfigsResponse.AlterConfigsResourceResponse, request.validate_only)
    return AlterConfigsResponse(responses=results)
