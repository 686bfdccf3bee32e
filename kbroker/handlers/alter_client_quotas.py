"""AlterClientQuotas (49): set and remove quotas of user / client-id / ip entities (KIP-546) as
ClientQuotaRecords; needs ALTER_CONFIGS on the cluster. An entity's ops apply all or none."""

from kbroker import handlers
from kbroker.metadata import records
from kbroker.security import quotas
from kbroker.security.acls import AclOperation
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

AlterClientQuotasResponse = API_BY_NAME["AlterClientQuotas"].response_class
Entry = AlterClientQuotasResponse.EntryData


def _entity(entry) -> list:
    return [Entry.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity]


# Kafka's messages of the refusals that answer every entity alike (its exceptions' default messages).
_REFUSAL_MESSAGES = {ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
                     ErrorCode.NOT_CONTROLLER: "This is not the correct controller for this cluster."}


def _refusal(request, code: int = ErrorCode.NOT_CONTROLLER):
    return AlterClientQuotasResponse(entries=[Entry(error_code=code, error_message=_REFUSAL_MESSAGES.get(code),
                                                    entity=_entity(e)) for e in request.entries])


@handlers.handles("AlterClientQuotas", 0, 1)
@handlers.metadata_change(_refusal, AclOperation.ALTER_CONFIGS)
async def handle(broker, context, request):
    results, change = [], []
    for entry in request.entries:
        parts = [(e.entity_type, e.entity_name) for e in entry.entity]
        problem = next(filter(None, (quotas.validate_alteration(parts, op.key, op.value, op.remove)
                                     for op in entry.ops)), None) or quotas.validate_entity(parts)
        if problem is None and len({op.key for op in entry.ops}) != len(entry.ops):
            problem = ErrorCode.INVALID_REQUEST, "A quota key appears twice for one entity"
        if problem is not None:
            results.append(Entry(error_code=problem[0], error_message=problem[1], entity=_entity(entry)))
            continue
        data = [records.ClientQuotaRecord.EntityData(entity_type=kind, entity_name=name) for kind, name in parts]
        change += [records.ClientQuotaRecord(entity=data, key=op.key, value=0.0 if op.remove else op.value,
                                             remove=op.remove) for op in entry.ops]
        results.append(Entry(error_message=None, entity=_entity(entry)))
    error = await broker.submit(change) if change and not request.validate_only else None
    handlers.mark_not_made(results, error)
    return AlterClientQuotasResponse(entries=results)
