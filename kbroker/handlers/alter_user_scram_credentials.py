"""AlterUserScramCredentials (51): add, replace and delete users' SCRAM credentials (KIP-554).

The client sends the salted password (never the password); the broker keeps
only what SCRAM's server side needs, the stored key and the server key, in
UserScramCredentialRecords of the metadata log. Checks as Kafka's: a user's
alterations apply all together or not at all.
"""

from kbroker import handlers
from kbroker.metadata import records
from kbroker.security import scram
from kbroker.security.acls import AclOperation
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

AlterUserScramCredentialsResponse = API_BY_NAME["AlterUserScramCredentials"].response_class
Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


def _refusal(request, code: int = ErrorCode.NOT_CONTROLLER):
    users = dict.fromkeys(a.name for a in [*request.deletions, *request.upsertions])
    return AlterUserScramCredentialsResponse(results=[Result(user=user, error_code=code) for user in users])


@handlers.handles("AlterUserScramCredentials", 0, 0)
@handlers.metadata_change(_refusal, AclOperation.ALTER)
async def handle(broker, context, request):
    alterations = [(deletion, None) for deletion in request.deletions]
    alterations += [(upsertion, upsertion) for upsertion in request.upsertions]
    by_user: dict[str, list] = {}
    for alteration, upsertion in alterations:
        by_user.setdefault(alteration.name, []).append((alteration, upsertion))
    results, change = [], []
    for user, wanted in by_user.items():
        problem, planned = _plan(broker.image, user, wanted)
        if problem is None:
            change += planned
            results.append(Result(user=user))
        else:
            results.append(Result(user=user, error_code=problem[0], error_message=problem[1]))
    error = await broker.submit(change) if change else None
    handlers.mark_not_made(results, error)
    return AlterUserScramCredentialsResponse(results=results)


def _plan(image, user: str, wanted: list) -> tuple[tuple[int, str] | None, list]:
    if not user:
        return (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"), []
    mechanisms = [alteration.mechanism for alteration, _ in wanted]
    if len(set(mechanisms)) != len(mechanisms):
        return (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"), []
    change = []
    for alteration, upsertion in wanted:
        mechanism = scram.mechanism_by_type(alteration.mechanism)
        if mechanism is None:
            return (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"), []
        if upsertion is None:
            if (user, mechanism.type) not in image.scram_credentials:
                return (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"), []
            change.append(records.RemoveUserScramCredentialRecord(name=user, mechanism=mechanism.type))
            continue
        if upsertion.iterations < mechanism.min_iterations:
            return (ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations: at least {mechanism.min_iterations}"), []
        if upsertion.iterations > mechanism.max_iterations:
            return (ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations: at most {mechanism.max_iterations}"), []
        if not upsertion.salt or not upsertion.salted_password:
            return (ErrorCode.UNACCEPTABLE_CREDENTIAL, "The salt and the salted password must not be empty"), []
        credential = scram.credential_from_salted_password(mechanism, bytes(upsertion.salt),
                                                           bytes(upsertion.salted_password), upsertion.iterations)
        change.append(records.UserScramCredentialRecord(
            name=user, mechanism=mechanism.type, salt=credential.salt, stored_key=credential.stored_key,
            server_key=credential.server_key, iterations=credential.iterations))
    return None, change
