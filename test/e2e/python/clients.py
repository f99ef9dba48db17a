"""The official Python clients, unmodified, against a running ortserve: `openai`'s Responses API
(plain, streamed, a function tool round trip with function_call_output, a json_schema format,
previous_response_id), `anthropic`'s Messages API (plain, streamed, a tool_use round trip,
count_tokens) and the OpenAI Agents SDK running an agent with one function tool to completion.

Usage: clients.py <server url> <api key> <model>. Prints one `python-clients: <check> ok` line per
check and exits non-zero at the first failure."""
import json
import sys

import anthropic
from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI, OpenAI

URL, KEY, MODEL = sys.argv[1:4]
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 24}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
QUESTION = "What is the weather in Paris for 3 days?"


def ok(check: str) -> None:
    print(f"python-clients: {check} ok", flush=True)


def valid_weather(args: dict) -> bool:
    return (
        set(args) == {"city", "days"}
        and isinstance(args["city"], str)
        and len(args["city"]) <= 24
        and isinstance(args["days"], int)
        and args["days"] >= 1
    )


def responses() -> None:
    client = OpenAI(base_url=f"{URL}/v1", api_key=KEY, max_retries=0)
    # Room to finish: the SDK's stream helper ends on response.completed, not response.incomplete.
    plain = client.responses.create(model=MODEL, input="Say hello.", max_output_tokens=64, temperature=0)
    assert plain.status == "completed", plain
    assert plain.id.startswith("resp_") and plain.output_text, plain
    assert plain.usage.output_tokens > 0
    ok("responses.create")

    with client.responses.stream(
        model=MODEL, input="Say hello.", max_output_tokens=64, temperature=0, store=False
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and "response.output_text.delta" in kinds, kinds
    assert final.output_text == plain.output_text, (final.output_text, plain.output_text)
    ok("responses.stream")

    tools = [{"type": "function", "name": "get_weather", "description": "Weather forecast", "parameters": WEATHER, "strict": True}]
    called = client.responses.create(
        model=MODEL,
        input=QUESTION,
        tools=tools,
        tool_choice="required",
        parallel_tool_calls=False,
        temperature=0,
        max_output_tokens=64,
        store=False,
    )
    call = next(o for o in called.output if o.type == "function_call")
    assert call.name == "get_weather" and valid_weather(json.loads(call.arguments)), call
    answer = client.responses.create(
        model=MODEL,
        input=[
            {"role": "user", "content": QUESTION},
            *called.output,
            {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 24 degrees."},
        ],
        tools=tools,
        tool_choice="none",
        temperature=0,
        max_output_tokens=24,
        store=False,
    )
    assert answer.output_text and all(o.type == "message" for o in answer.output), answer
    ok("responses function tool round trip")

    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    person = client.responses.create(
        model=MODEL,
        input="Describe a person as JSON.",
        text={"format": {"type": "json_schema", "name": "person", "schema": schema, "strict": True}},
        temperature=0,
        max_output_tokens=64,
        store=False,
    )
    value = json.loads(person.output_text)
    assert set(value) == {"name", "age"} and isinstance(value["age"], int), value
    ok("responses text.format json_schema")

    follow = client.responses.create(
        model=MODEL, previous_response_id=plain.id, input="And one more?", max_output_tokens=4, store=False
    )
    assert follow.previous_response_id == plain.id and follow.usage.input_tokens > plain.usage.input_tokens
    assert client.responses.retrieve(plain.id).id == plain.id
    client.responses.delete(plain.id)
    try:
        client.responses.retrieve(plain.id)
        raise AssertionError("a deleted response was returned")
    except Exception as err:  # the SDK's NotFoundError
        assert getattr(err, "status_code", None) == 404, err
    ok("responses previous_response_id, retrieve, delete")


def messages() -> None:
    client = anthropic.Anthropic(base_url=URL, api_key=KEY, max_retries=0)
    # The SDK no longer lists the sampling fields (newer Claude models dropped them); the API takes them.
    greedy = {"extra_body": {"temperature": 0}}
    question = [{"role": "user", "content": QUESTION}]
    plain = client.messages.create(model=MODEL, max_tokens=8, messages=question, **greedy)
    assert plain.type == "message" and plain.stop_reason == "max_tokens" and plain.content[0].text, plain
    ok("messages.create")

    with client.messages.stream(model=MODEL, max_tokens=8, messages=question, **greedy) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == plain.content[0].text, (final.content, plain.content)
    ok("messages.stream")

    tools = [{"name": "get_weather", "description": "Weather forecast", "input_schema": WEATHER}]
    called = client.messages.create(
        model=MODEL,
        max_tokens=64,
        tools=tools,
        tool_choice={"type": "tool", "name": "get_weather"},
        messages=question,
        **greedy,
    )
    use = next(b for b in called.content if b.type == "tool_use")
    assert called.stop_reason == "tool_use" and valid_weather(use.input), called
    answer = client.messages.create(
        model=MODEL,
        max_tokens=24,
        tools=tools,
        tool_choice={"type": "none"},
        messages=[
            *question,
            {"role": "assistant", "content": called.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "Sunny."}]},
        ],
        **greedy,
    )
    assert answer.content and all(b.type == "text" for b in answer.content), answer
    ok("messages tool_use round trip")

    counted = client.messages.count_tokens(model=MODEL, messages=question)
    assert counted.input_tokens == plain.usage.input_tokens + (plain.usage.cache_read_input_tokens or 0), counted
    ok("messages.count_tokens")


def agent() -> None:
    set_tracing_disabled(True)
    calls: list[tuple[str, int]] = []

    @function_tool
    def get_weather(city: str, days: int) -> str:
        """Weather forecast for a city."""
        calls.append((city, days))
        return f"Sunny in {city} for {days} days."

    model = OpenAIResponsesModel(model=MODEL, openai_client=AsyncOpenAI(base_url=f"{URL}/v1", api_key=KEY, max_retries=0))
    weather = Agent(
        name="weather",
        instructions="Answer with the weather tool.",
        tools=[get_weather],
        model=model,
        # The first turn must call the tool; the SDK then resets tool_choice so the next turn can answer.
        model_settings=ModelSettings(tool_choice="required", temperature=0, max_tokens=48, parallel_tool_calls=False),
    )
    result = Runner.run_sync(weather, QUESTION, max_turns=4)
    assert calls, "the agent never called its tool"
    assert isinstance(result.final_output, str) and result.final_output, result
    ok(f"agents run to completion ({len(calls)} tool call(s))")


if __name__ == "__main__":
    responses()
    messages()
    agent()
