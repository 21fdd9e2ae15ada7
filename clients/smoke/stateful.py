"""A stateful test of `memgpt serve` through the generated Python client (clients/python), run
by tests/integration/contract.rs. hypothesis draws sequences of API calls: agents created and
deleted, passages inserted, deleted, updated and forgotten, messages sent, shared blocks
created, attached, appended to, detached and deleted, and the server stopped (SIGTERM or
SIGKILL) and started again on the same data directory. Every search, listing and block read is
compared with a plain model of what was stored: whatever happened before, a search finds every
stored passage and message holding its word, and nothing else.

Usage: MEMGPT_BIN=.../memgpt MEMGPT_LLM=http://127.0.0.1:PORT/v1 MEMGPT_DATA=DIR
MEMGPT_ADMIN_KEY=... [MEMGPT_STATEFUL_EXAMPLES=N] python stateful.py
(the model at MEMGPT_LLM answers every step with send_message, and embeds)."""

import os
import re
import signal
import subprocess
import threading
import uuid

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from memgpt_rs_client import AuthenticatedClient
from memgpt_rs_client.api.default import (
    append_shared_block,
    attach_block,
    create_agent,
    create_key,
    create_shared_block,
    create_tenant,
    delete_agent,
    delete_passage,
    delete_shared_block,
    detach_block,
    forget_passage,
    get_shared_block,
    insert_passages,
    list_passages,
    search_archival,
    search_recall,
    send_message,
    update_passage,
)
from memgpt_rs_client.models import (
    AppendText,
    CreateAgent,
    CreateBlock,
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
from memgpt_rs_client.models.mode import Mode

# Words the analyser keeps as they are (no stemming changes them), so "holds the word" is plain.
WORDS = ["zebra", "quokka", "wombat", "numbat", "dingo", "bilby", "kiwi", "lamp", "river", "garden"]
ADMIN = os.environ["MEMGPT_ADMIN_KEY"]


class Server:
    """`memgpt serve` on the data directory, stopped and started at will."""

    def __init__(self):
        self.process = None
        self.url = None
        self.restarts = 0
        self.start()

    def start(self):
        env = {
            "PATH": os.environ.get("PATH", ""),
            "MEMGPT_DATA_DIR": os.environ["MEMGPT_DATA"],
            "MEMGPT_BASE_URL": os.environ["MEMGPT_LLM"],
            "MEMGPT_MODEL": "gpt-4o-mini",
            "MEMGPT_EMBEDDER": "openai:text-embedding-3-small",
            "MEMGPT_HOME": os.environ["MEMGPT_DATA"],
            "MEMGPT_ADMIN_KEY": ADMIN,
            "NO_COLOR": "1",
        }
        self.process = subprocess.Popen(
            [os.environ["MEMGPT_BIN"], "serve", "--listen", "127.0.0.1:0"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for line in self.process.stderr:
            found = re.search(r" on (http://[0-9.:]+)", line)
            if found:
                self.url = found.group(1)
                break
        else:
            raise AssertionError("memgpt serve exited before listening")
        # Keep reading its log, so it never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in self.process.stderr], daemon=True).start()

    def restart(self, kill):
        self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        self.process.wait(timeout=60)
        self.restarts += 1
        self.start()

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)


SERVER = Server()


def ok(result, what):
    assert not isinstance(result, ErrorBody) and result is not None, f"{what}: {result}"
    return result


class Api(RuleBasedStateMachine):
    """The API against a model: agent id -> passages (id -> text) and user messages."""

    agents = Bundle("agents")
    blocks = Bundle("blocks")

    def __init__(self):
        super().__init__()
        with AuthenticatedClient(base_url=SERVER.url, token=ADMIN) as admin:
            tenant = ok(create_tenant.sync(client=admin, body=CreateTenant(name=f"stateful-{uuid.uuid4().hex}")), "tenant")
            self.key = ok(
                create_key.sync(tenant_id=str(tenant.id), client=admin, body=CreateKey(name="k")), "key"
            ).key
        self.passages = {}  # agent -> {passage id: text}
        self.messages = {}  # agent -> [user message texts]
        self.held = {}  # block id -> (label, text, {agents})
        self.deleted = []

    def client(self):
        return AuthenticatedClient(base_url=SERVER.url, token=self.key, timeout=120)

    @rule(target=agents)
    def create(self):
        with self.client() as c:
            agent = ok(create_agent.sync(client=c, body=CreateAgent(name=f"a{len(self.passages) + len(self.deleted)}")), "create")
        self.passages[str(agent.id)] = {}
        self.messages[str(agent.id)] = []
        return str(agent.id)

    @rule(agent=consumes(agents))
    def delete(self, agent):
        with self.client() as c:
            for block, (label, text, holders) in self.held.items():
                holders.discard(agent)
            r = delete_agent.sync_detailed(agent_id=agent, client=c)
            assert r.status_code == 204, r
        del self.passages[agent]
        del self.messages[agent]
        self.deleted.append(agent)

    @rule(agent=agents, words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    def insert(self, agent, words):
        text = " ".join(words)
        with self.client() as c:
            inserted = ok(insert_passages.sync(agent_id=agent, client=c, body=InsertPassages(text=text)), "insert")
        for id in inserted.ids:
            self.passages[agent][str(id)] = text

    @rule(agent=agents, pick=st.integers(0, 20), how=st.sampled_from(["delete", "forget", "update"]),
          words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=2))
    def change(self, agent, pick, how, words):
        stored = sorted(self.passages[agent])
        if not stored:
            return
        passage = stored[pick % len(stored)]
        with self.client() as c:
            if how == "delete":
                r = delete_passage.sync_detailed(agent_id=agent, passage_id=passage, client=c)
                assert r.status_code == 204, r
            elif how == "forget":
                r = forget_passage.sync_detailed(agent_id=agent, passage_id=passage, client=c,
                                                 body=ForgetPassage(reason="no longer true"))
                assert r.status_code == 204, r
            else:
                text = " ".join(words)
                moved = ok(update_passage.sync(agent_id=agent, passage_id=passage, client=c,
                                               body=UpdatePassage(text=text)), "update")
                for id in moved.ids:
                    self.passages[agent][str(id)] = text
        del self.passages[agent][passage]

    @rule(agent=agents, words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    def message(self, agent, words):
        text = "I saw " + " ".join(words)
        with self.client() as c:
            step = ok(send_message.sync(agent_id=agent, client=c, body=SendMessage(text=text)), "send")
        assert step.replies == ["Noted."], step
        self.messages[agent].append(text)

    @rule(target=blocks, word=st.sampled_from(WORDS))
    def create_block(self, word):
        label = f"notes{len(self.held)}"
        with self.client() as c:
            block = ok(create_shared_block.sync(client=c, body=CreateBlock(label=label, value=word)), "block")
        self.held[str(block.id)] = (label, word, set())
        return str(block.id)

    @rule(block=blocks, agent=agents, attach=st.booleans())
    def attachment(self, block, agent, attach):
        if block not in self.held:
            return
        label, text, holders = self.held[block]
        if (agent in holders) == attach:
            return
        with self.client() as c:
            if attach:
                r = attach_block.sync_detailed(agent_id=agent, block_id=block, client=c)
                assert r.status_code in (200, 201), (r.status_code, r.content)
                holders.add(agent)
            else:
                r = detach_block.sync_detailed(agent_id=agent, block_id=block, client=c)
                assert r.status_code in (200, 204), (r.status_code, r.content)
                holders.discard(agent)

    @rule(block=blocks, word=st.sampled_from(WORDS))
    def append(self, block, word):
        if block not in self.held:
            return
        label, text, holders = self.held[block]
        with self.client() as c:
            ok(append_shared_block.sync(block_id=block, client=c, body=AppendText(text=word)), "append")
        # An append starts a new line.
        self.held[block] = (label, text + "\n" + word, holders)

    @rule(block=blocks)
    def delete_block(self, block):
        if block not in self.held:
            return
        label, text, holders = self.held[block]
        with self.client() as c:
            r = delete_shared_block.sync_detailed(block_id=block, client=c)
        if holders:
            assert r.status_code == 409, (r.status_code, r.content)
        else:
            assert r.status_code == 204, (r.status_code, r.content)
            del self.held[block]

    @rule(agent=agents, word=st.sampled_from(WORDS), mode=st.sampled_from([Mode.TEXT, Mode.HYBRID]))
    def search(self, agent, word, mode):
        with self.client() as c:
            found = ok(search_archival.sync(agent_id=agent, client=c,
                                            body=SearchArchival(query=word, mode=mode, size=1000)), "search")
        got = sorted(str(item.id) for item in found.items)
        holding = sorted(p for p, text in self.passages[agent].items() if word in text.split())
        if mode == Mode.TEXT:
            assert got == holding, (word, got, holding, self.passages[agent])
        else:
            # Hybrid: every passage holding the word, among the agent's current passages.
            assert set(holding) <= set(got) <= set(self.passages[agent]), (word, got, holding)
        assert found.total == len(got), (found.total, got)

    @rule(agent=agents, word=st.sampled_from(WORDS))
    def recall(self, agent, word):
        with self.client() as c:
            found = ok(search_recall.sync(agent_id=agent, client=c, body=SearchRecall(query=word, size=1000)), "recall")
        by_words = sorted(
            item.text for item in found.items
            if str(getattr(item, "found_by", "")) == "words" and item.kind == "user"
        )
        said = sorted(m for m in self.messages[agent] if word in m.split())
        assert by_words == said, (word, by_words, said)

    @rule(kill=st.booleans())
    def restart(self, kill):
        SERVER.restart(kill)

    @invariant()
    def listings_and_blocks_hold(self):
        with self.client() as c:
            for agent, passages in self.passages.items():
                listed = ok(list_passages.sync(agent_id=agent, client=c, size=1000), "list")
                current = {str(item.id) for item in listed.items if not item.valid_to}
                assert current == set(passages), (current, passages)
            for block, (label, text, holders) in self.held.items():
                stored = ok(get_shared_block.sync(block_id=block, client=c), "get block")
                assert stored.value == text, (stored.value, text)
            for agent in self.deleted[-3:]:
                gone = search_archival.sync_detailed(agent_id=agent, client=c, body=SearchArchival(query="zebra"))
                assert gone.status_code == 404, gone.status_code


examples = int(os.environ.get("MEMGPT_STATEFUL_EXAMPLES", "12"))
Api.TestCase.settings = settings(
    max_examples=examples,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)

try:
    Api.TestCase().runTest()
finally:
    SERVER.stop()
print(f"stateful: ok ({examples} sequences, {SERVER.restarts} restarts)")
