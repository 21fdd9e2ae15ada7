"""The official `openai` Python SDK on the OpenAI-compatible facade of a running `memgpt serve`
(tests/integration/contract.rs): a completion, a streamed one with usage, and a model failure
mid-stream, which the SDK must raise rather than read as an empty reply.
Usage: MEMGPT_URL=http://... MEMGPT_KEY=mgk_... python openai_smoke.py (an agent `sam` exists;
its model fails when asked "please fail")."""

import os

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

print("openai sdk: ok")
