"""AlterConfigs (33): replace a topic's whole set of overrides, a broker's dynamic configs or a group's configs."""

from kbroker import handlers
from kbroker.config.admin import (BROKER_RESOURCE, SET, alter_authorized, alter_resources, check_broker_change,
                                  check_change_form, plan_alter, refuse_resources)
from kbroker.config.group_config_admin import plan_group_change
from kbroker.metadata.image import GROUP_RESOURCE
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

AlterConfigsResponse = API_BY_NAME["AlterConfigs"].response_class
Result = AlterConfigsResponse.AlterConfigsResourceResponse


def _refusal(request, code: int = ErrorCode.NOT_CONTROLLER):
    return AlterConfigsResponse(responses=refuse_resources(request.resources, Result, code))


@handlers.handles("AlterConfigs", 0, 2)
async def handle(broker, context, request):
    """A broker checks a change itself (Kafka's ConfigAdminManager.preprocess) before it makes or forwards
    it: of any resource, a name given twice and a null value (INVALID_REQUEST); of a broker, the rest."""
    def check(resource):
        check_change_form([(c.name, SET, c.value) for c in resource.configs], legacy=True)
        if resource.resource_type == BROKER_RESOURCE:
            check_broker_change(broker.static_config, broker.image, broker.node_id, broker.listener_protocols,
                                resource.resource_name, [(c.name, SET, c.value) for c in resource.configs], legacy=True)

    return await alter_authorized(broker, context, request, _alter, AlterConfigsResponse, Result, check)


async def handle_forwarded(controller, context, request):
    """On the controller: the broker that forwarded the request has checked its broker resources."""
    return await alter_authorized(controller, context, request, _alter, AlterConfigsResponse, Result)


@handlers.metadata_change(_refusal)
async def _alter(broker, context, request):
    def plan_for(image, resource):
        if resource.resource_type == GROUP_RESOURCE:
            changes = [(config.name, SET, config.value) for config in resource.configs]
            return plan_group_change(broker.config, image, resource.resource_name, changes, legacy=True)
        wanted = {config.name: config.value for config in resource.configs}
        return plan_alter(broker.config, image, broker.node_id, resource.resource_type, resource.resource_name, wanted)

    results = await alter_resources(broker, request.resources, plan_for, Result, request.validate_only)
    return AlterConfigsResponse(responses=results)
