"""DescribeUserScramCredentials (50): which SCRAM mechanisms and iteration counts users have (KIP-554);
never the credentials themselves."""

from kbroker import handlers
from kbroker.security.acls import AclOperation
from kbroker.security.authorization import allowed_on_cluster
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

DescribeUserScramCredentialsResponse = API_BY_NAME["DescribeUserScramCredentials"].response_class
Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult


@handlers.handles("DescribeUserScramCredentials", 0, 0)
async def handle(broker, context, request):
    if not allowed_on_cluster(broker, context, AclOperation.DESCRIBE):
        # As Kafka's error answer: the code at the top and once per user named, without the user's name.
        refused = Result(user="", error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None)
        return DescribeUserScramCredentialsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                    error_message=None, results=[refused] * len(request.users or ()))
    infos: dict[str, list] = {}
    for (user, mechanism), record in sorted(broker.image.scram_credentials.items()):
        infos.setdefault(user, []).append(Result.CredentialInfo(mechanism=mechanism, iterations=record.iterations))
    if not request.users:  # null or empty: every user
        return DescribeUserScramCredentialsResponse(
            results=[Result(user=user, credential_infos=found) for user, found in infos.items()])
    names = [user.name for user in request.users]
    results = []
    for name in dict.fromkeys(names):
        if names.count(name) > 1:
            results.append(Result(user=name, error_code=ErrorCode.DUPLICATE_RESOURCE, error_message=(
                "Cannot describe SCRAM credentials for the same user twice in a single request")))
        elif name not in infos:
            results.append(Result(user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                  error_message="Attempt to describe a user credential that does not exist"))
        else:
            results.append(Result(user=name, credential_infos=infos[name]))
    return DescribeUserScramCredentialsResponse(results=results)
