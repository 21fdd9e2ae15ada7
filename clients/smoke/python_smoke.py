"""A whole session through the generated Python client (clients/python), against a running
`memgpt serve` whose model answers with `send_message`: what tests/integration/contract.rs
runs. Usage: MEMGPT_URL=http://... MEMGPT_ADMIN_KEY=... python python_smoke.py"""

import json
import os

from memgpt_rs_client import AuthenticatedClient
from memgpt_rs_client.api.default import (
    create_agent,
    create_key,
    create_tenant,
    delete_agent,
    forget_passage,
    get_agent,
    get_context,
    insert_passages,
    list_blocks,
    list_passages,
    search_archival,
    search_recall,
    send_message,
    update_passage,
)
from memgpt_rs_client.models import (
    AgentView,
    CreateAgent,
    CreateKey,
    CreateTenant,
    ErrorBody,
    ForgetPassage,
    InsertPassages,
    SearchArchival,
    SearchRecall,
    SendMessage,
    UpdatePassage,
)

url, admin = os.environ["MEMGPT_URL"], os.environ["MEMGPT_ADMIN_KEY"]

# A tenant and its key, with the admin key.
with AuthenticatedClient(base_url=url, token=admin) as client:
    tenant = create_tenant.sync(client=client, body=CreateTenant(name="python-smoke"))
    key = create_key.sync(tenant_id=str(tenant.id), client=client, body=CreateKey(name="smoke")).key

with AuthenticatedClient(base_url=url, token=key) as client:
    agent = create_agent.sync(client=client, body=CreateAgent(name="py", persona="I am terse."))
    assert isinstance(agent, AgentView), agent
    agent_id = str(agent.id)

    step = send_message.sync(agent_id=agent_id, client=client, body=SendMessage(text="Hi, I keep bees."))
    assert step.replies == ["Noted."], step

    # Streamed: Server-Sent Events, read with the client's own HTTP connection.
    events = []
    with client.get_httpx_client().stream(
        "POST", f"/v1/agents/{agent_id}/messages/stream", json={"text": "And goats."}
    ) as response:
        assert response.status_code == 200, response.status_code
        event = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[len("event: "):]
            elif line.startswith("data: "):
                events.append((event, json.loads(line[len("data: "):])))
    assert events[-1][0] == "step" and events[-1][1]["replies"] == ["Noted."], events[-1]

    context = get_context.sync(agent_id=agent_id, client=client)
    assert any("I keep bees." in m.content for m in context.messages), context
    blocks = list_blocks.sync(agent_id=agent_id, client=client)
    assert {b.label for b in blocks.blocks} >= {"persona", "human"}, blocks

    inserted = insert_passages.sync(agent_id=agent_id, client=client, body=InsertPassages(text="The hives are on the hill."))
    assert len(inserted.ids) == 1, inserted
    listed = list_passages.sync(agent_id=agent_id, client=client)
    assert listed.total == 1, listed
    found = search_archival.sync(agent_id=agent_id, client=client, body=SearchArchival(query="hives"))
    assert found.items and "hill" in found.items[0].text, found
    # The fact changes: a new version supersedes it, then it is forgotten; history stays.
    moved = update_passage.sync(
        agent_id=agent_id, passage_id=str(inserted.ids[0]), client=client,
        body=UpdatePassage(text="The hives are by the river."),
    )
    assert len(moved.ids) == 1, moved
    found = search_archival.sync(agent_id=agent_id, client=client, body=SearchArchival(query="hives"))
    assert [item.text for item in found.items] == ["The hives are by the river."], found
    forgotten = forget_passage.sync_detailed(
        agent_id=agent_id, passage_id=str(moved.ids[0]), client=client,
        body=ForgetPassage(reason="the bees swarmed"),
    )
    assert forgotten.status_code == 204, forgotten.status_code
    history = search_archival.sync(
        agent_id=agent_id, client=client, body=SearchArchival(query="hives", include_retired=True),
    )
    assert history.total == 2 and all(item.valid_to for item in history.items), history
    recalled = search_recall.sync(agent_id=agent_id, client=client, body=SearchRecall(query="goats"))
    assert any("goats" in hit.text for hit in recalled.items), recalled

    gone = delete_agent.sync_detailed(agent_id=agent_id, client=client)
    assert gone.status_code == 204, gone.status_code
    missing = get_agent.sync(agent_id=agent_id, client=client)
    assert isinstance(missing, ErrorBody) and missing.error.code.value == "not_found", missing

print("python client: ok")
