"""AlterUserScramCredentials (51): add, replace and delete users' SCRAM credentials (KIP-554).

The client sends the salted password (never the password); the broker keeps
only what SCRAM's server side needs, the stored key and the server key, in
UserScramCredentialRecords of the metadata log. Checks as Kafka's: one
alteration per user and request, whatever its mechanism; an empty salt is
taken, as Kafka takes it.
"""

from kbroker import handlers
from kbroker.metadata import records
from kbroker.security import scram
from kbroker.security.acls import AclOperation
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

AlterUserScramCredentialsResponse = API_BY_NAME["AlterUserScramCredentials"].response_class
Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


# Kafka's messages of the refusals that answer every user alike (its exceptions' default messages).
_REFUSAL_MESSAGES = {ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
                     ErrorCode.NOT_CONTROLLER: "This is not the correct controller for this cluster."}


def _refusal(request, code: int = ErrorCode.NOT_CONTROLLER):
    users = dict.fromkeys(a.name for a in [*request.deletions, *request.upsertions])
    return AlterUserScramCredentialsResponse(results=[
        Result(user=user, error_code=code, error_message=_REFUSAL_MESSAGES.get(code)) for user in users])


@handlers.handles("AlterUserScramCredentials", 0, 0)
@handlers.metadata_change(_refusal, AclOperation.ALTER)
async def handle(broker, context, request):
    planned: dict[str, object] = {}  # user: the one record of their alteration
    refused: dict[str, tuple[int, str]] = {}
    # As Kafka's ScramControlManager: the deletions first, then the upsertions; a user altered twice in one
    # request (whatever the mechanisms) is refused as a duplicate, and a user's first refusal stands.
    for alteration, upserting in [*((d, False) for d in request.deletions), *((u, True) for u in request.upsertions)]:
        user = alteration.name
        if user in refused:
            continue
        if planned.pop(user, None) is not None:
            refused[user] = (ErrorCode.DUPLICATE_RESOURCE,
                             "A user credential cannot be altered twice in the same request")
            continue
        problem, record = (_upsertion if upserting else _deletion)(broker.image, alteration)
        if problem is None:
            planned[user] = record
        else:
            refused[user] = problem
    results = [Result(user=user, error_message=None) for user in planned]
    results += [Result(user=user, error_code=code, error_message=message) for user, (code, message) in refused.items()]
    change = list(planned.values())
    error = await broker.submit(change) if change else None
    handlers.mark_not_made(results, error)
    return AlterUserScramCredentialsResponse(results=results)


def _mechanism(alteration) -> tuple[tuple[int, str] | None, scram.ScramMechanism | None]:
    if not alteration.name:
        return (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"), None
    mechanism = scram.mechanism_by_type(alteration.mechanism)
    if mechanism is None:
        return (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"), None
    return None, mechanism


def _deletion(image, deletion) -> tuple[tuple[int, str] | None, object]:
    problem, mechanism = _mechanism(deletion)
    if problem is not None:
        return problem, None
    if (deletion.name, mechanism.type) not in image.scram_credentials:
        return (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"), None
    return None, records.RemoveUserScramCredentialRecord(name=deletion.name, mechanism=mechanism.type)


def _upsertion(image, upsertion) -> tuple[tuple[int, str] | None, object]:
    problem, mechanism = _mechanism(upsertion)
    if problem is not None:
        return problem, None
    if upsertion.iterations < mechanism.min_iterations:
        return (ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations: at least {mechanism.min_iterations}"), None
    if upsertion.iterations > mechanism.max_iterations:
        return (ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations: at most {mechanism.max_iterations}"), None
    credential = scram.credential_from_salted_password(mechanism, bytes(upsertion.salt),
                                                       bytes(upsertion.salted_password), upsertion.iterations)
    return None, records.UserScramCredentialRecord(
        name=upsertion.name, mechanism=mechanism.type, salt=credential.salt, stored_key=credential.stored_key,
        server_key=credential.server_key, iterations=credential.iterations)
