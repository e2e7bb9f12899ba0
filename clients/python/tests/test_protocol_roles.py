"""docs/protocol.md says which roles may send each message type; the node enforces roles in each
module's handler. This test asks a real node every request type from each role's key (the cluster
key: node; an admin key; a tenant key) and fails, naming the type and the role, where the node's
answer and the reference part: a role the reference names refused (401 or 403), or a role it does
not name served. A tenant's requests name its own claim, tenant and datasets, so that a 403 means
its role, not another tenant's resource. Run by ctest as test_protocol_roles."""
import os
import re

import pytest

from conftest import SOURCE, Cluster

DOC = os.path.join(SOURCE, "docs", "protocol.md")
TENANT = "acme/web"
# The tenant's claim the probes name (a new one after a probe released it: ids are never reused).
CLAIM = ["roles-claim-1"]
ROLES = ("node", "admin", "tenant")
# Long enough that a loaded machine's reply is not taken for silence: a request answered with
# nothing at all (some between nodes are) counts as served.
TIMEOUT_MS = 8000
# Types no one sends as a request.
NOT_REQUESTS = {"MSG_UNSPECIFIED", "MSG_ERROR", "MSG_EVENT"}


def documented():
    """{type name: (request message name or None, set of roles)} from docs/protocol.md's table."""
    rows = {}
    with open(DOC) as doc:
        for line in doc:
            match = re.match(r"^\| `(MSG_\w+)` \| (\d+) \| (.*) \| ([^|]*) \|$", line.rstrip("\n"))
            if not match:
                continue
            name, comment, who = match.group(1), match.group(3), match.group(4).strip()
            request = comment.split("->")[0].strip().split(" ")[0] if "->" in comment else None
            if request in ("-", "", None) or not re.match(r"^[A-Z]\w*$", request):
                request = None
            roles = set(ROLES) if who == "any" else {role for role in ROLES if re.search(r"\b%s\b" % role, who)}
            rows[name] = (request, roles)
    return rows


def fill(message, depth=0):
    """Sets every scalar field of MESSAGE to a plausible value (a tenant's own names where a field
    names a tenant, dataset or claim), and nested messages likewise, one level down."""
    for field in message.DESCRIPTOR.fields:
        if field.label == field.LABEL_REPEATED:
            continue
        name = field.name
        if field.type == field.TYPE_MESSAGE:
            if depth < 2:
                fill(getattr(message, name), depth + 1)
            continue
        if field.type == field.TYPE_STRING:
            if name == "tenant":
                value = TENANT
            elif name in ("dataset", "prefix"):
                value = TENANT + "/roles"
            elif name in ("claim_id", "id"):
                value = CLAIM[0]
            elif name == "kinds":
                value = "claims"
            elif name == "driver":
                value = "proc"
            elif name == "op":
                value = "put"
            else:
                value = "roles-x"
            setattr(message, name, value)
        elif field.type == field.TYPE_BYTES:
            # A chain's start may be empty, its end is a hash; a value is a value.
            setattr(message, name, b"x" if name == "value" else bytes(32) if name == "end" else b"")
        elif field.type == field.TYPE_BOOL:
            setattr(message, name, False)
        elif field.type == field.TYPE_ENUM:
            setattr(message, name, 1)
        elif field.type in (field.TYPE_DOUBLE, field.TYPE_FLOAT):
            setattr(message, name, 1.0)
        elif name == "memory_bytes":
            setattr(message, name, 16 * 1024 * 1024)
        elif name == "ttl_ms":
            setattr(message, name, 60000)
        else:
            setattr(message, name, 1)


@pytest.fixture
def node(shoal, tmp_path):
    made = Cluster(tmp_path, 1)
    yield made
    made.stop()


def test_the_reference_names_who_the_node_serves(shoal, node):
    pb = shoal.messages
    rows = documented()
    names = [value.name for value in pb.MsgType.DESCRIPTOR.values if value.name not in NOT_REQUESTS]
    assert names, "no message types in shoal.proto"
    undocumented = [name for name in names if name not in rows]
    assert not undocumented, "docs/protocol.md has no row for %s" % ", ".join(undocumented)
    certs = {"node": node.cluster_key, "admin": node.admin, "tenant": node.tenant}
    parted = []
    seen = []
    unclear = []
    for name in names:
        request, roles = rows[name]
        number = pb.MsgType.Value(name)
        answers = {}
        # The tenant's claim, running for each type (a release, stop or pause probed before may
        # have ended it), so that a 404 or 409 does not stand in for a refusal.
        with node.client(0) as admin:
            try:
                state = admin.claim_show(CLAIM[0]).state
            except shoal.NotFound:
                state = None
            if state == pb.CLAIM_PAUSED:
                admin.claim_resume(CLAIM[0])
            elif state == pb.CLAIM_STOPPED:
                admin.claim_start(CLAIM[0])
            elif state != pb.CLAIM_RUNNING:
                CLAIM[0] = "roles-claim-%d" % (int(CLAIM[0].rsplit("-", 1)[1]) + 1)
                admin.claim_create(TENANT, 16 * 1024 * 1024, claim_id=CLAIM[0])
        for role in ROLES:
            body = None
            if request:
                body = getattr(pb, request)()
                fill(body)
            with node.client(0, cert=certs[role], timeout_ms=TIMEOUT_MS) as client:
                try:
                    client.call(number, body)
                    status, why = 200, ""
                except shoal.StatusError as refused:
                    status, why = refused.status, refused.message
                except shoal.TimeoutError:
                    status, why = None, "no reply"
            served = status not in (401, 403)
            answers[role] = "%s %s" % (status, why)
            seen.append("%s %s: %s %s" % (name, role, status, why))
            if served != (role in roles):
                parted.append("%s from role %s: the reference says %s, the node answered %s%s"
                              % (name, role, "it may" if role in roles else "it may not", status,
                                 "" if served else " (%s)" % why))
        # Refused as a bad request from every role: the probe's body says nothing of roles.
        if all(answer.startswith("400 ") for answer in answers.values()):
            unclear.append("%s: %s" % (name, answers["admin"]))
    print("\n".join(seen))
    assert not unclear, "the probe's body of these types is refused from every role, fill it better:\n" + \
        "\n".join(unclear)
    assert not parted, "docs/protocol.md and the node's role checks part:\n" + "\n".join(parted)
