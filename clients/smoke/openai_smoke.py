"""The official `openai` Python SDK on the OpenAI-compatible facade of a running `memgpt serve`
(tests/integration/contract.rs): a completion, a streamed one with usage, a model failure
mid-stream, which the SDK must raise rather than read as an empty reply, and the SDK's own
retries of a failed request, which must leave the user's message stored once.
Usage: MEMGPT_URL=http://... MEMGPT_KEY=mgk_... python openai_smoke.py (an agent `sam` exists;
its model fails when asked "please fail", and the first time it is asked "flaky-probe")."""

import json
import os
import urllib.request

import openai

client = openai.OpenAI(base_url=os.environ["MEMGPT_URL"] + "/v1", api_key=os.environ["MEMGPT_KEY"])

reply = client.chat.completions.create(model="sam", messages=[{"role": "user", "content": "Hi"}])
assert reply.choices[0].message.content == "Noted.", reply
assert client.models.retrieve("sam").id == "sam"

chunks = list(
    client.chat.completions.create(
        model="sam",
        messages=[{"role": "user", "content": "Hi again"}],
        stream=True,
        stream_options={"include_usage": True},
    )
)
text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
assert text == "Noted.", chunks
assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0, chunks[-1]

try:
    stream = client.chat.completions.create(
        model="sam", messages=[{"role": "user", "content": "please fail"}], stream=True
    )
    for chunk in stream:
        pass
    raise AssertionError("a failed model read as a successful stream")
except openai.APIError as error:
    assert "the model failed" in str(error), error

try:
    client.chat.completions.create(model="sam", messages=[{"role": "user", "content": "please fail"}])
    raise AssertionError("a failed model read as a successful completion")
except openai.InternalServerError as error:
    assert error.status_code == 502, error


def stored(text):
    """How many of sam's user messages say `text` (the native API)."""
    agent = client.models.retrieve("sam").model_extra["agent_id"]
    request = urllib.request.Request(
        f"{os.environ['MEMGPT_URL']}/v1/agents/{agent}/messages?size=1000",
        headers={"Authorization": f"Bearer {os.environ['MEMGPT_KEY']}"},
    )
    with urllib.request.urlopen(request) as response:
        items = json.load(response)["items"]
    return sum(1 for m in items if m["kind"] == "user" and m["text"] == text)


# The SDK retries a 502 twice on its own (max_retries=2): three requests, one message.
try:
    client.chat.completions.create(
        model="sam", messages=[{"role": "user", "content": "please fail: retry-probe"}]
    )
    raise AssertionError("a failed model read as a successful completion")
except openai.InternalServerError as error:
    assert error.status_code == 502, error
    assert "127.0.0.1" not in str(error) and "http://" not in str(error), error
assert stored("please fail: retry-probe") == 1, stored("please fail: retry-probe")

# The model fails once, then answers: the SDK's retry resumes the step; one message, answered.
reply = client.chat.completions.create(
    model="sam", messages=[{"role": "user", "content": "flaky-probe"}]
)
assert reply.choices[0].message.content == "Noted.", reply
assert stored("flaky-probe") == 1, stored("flaky-probe")

# A key of the caller's own: the same completion again, the message once.
first = client.chat.completions.create(
    model="sam",
    messages=[{"role": "user", "content": "keyed-probe"}],
    extra_headers={"Idempotency-Key": "keyed-probe-1"},
)
again = client.chat.completions.create(
    model="sam",
    messages=[{"role": "user", "content": "keyed-probe"}],
    extra_headers={"Idempotency-Key": "keyed-probe-1"},
)
assert again.id == first.id, (first, again)
assert stored("keyed-probe") == 1, stored("keyed-probe")

print("openai sdk: ok")
