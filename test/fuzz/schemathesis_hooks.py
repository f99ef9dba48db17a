"""Schemathesis hooks. Positive cases are steered past the first checks, so fuzzing reaches body
validation and the engine: most drop the optional project header (its format is checked before
the body), and half name the served model. Positive cases that break a documented rule the schema
cannot state are dropped. Negative cases are left as generated."""
import json
import os
import random
import re

import schemathesis
from schemathesis import GenerationMode

SERVED_MODEL = "tiny"
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"
RESPONSES = "/v1/responses"
# Routes whose body names a model: half the generated bodies name the served one.
MODEL_ROUTES = (CHAT, COMPLETIONS, MESSAGES, COUNT_TOKENS, RESPONSES, "/tokenize", "/detokenize")
# max_tokens when a completions request leaves it out (OpenAI's and vLLM's legacy default).
COMPLETIONS_DEFAULT_MAX_TOKENS = 16
# What the served synthetic model (test/fuzz/serve-synthetic.ts) takes: token ids below its
# vocabulary size, and priority only under a priority scheduling policy (it is first come, first served).
MODEL_VOCAB = 269
# Its context (SYNTHETIC.contextLength), and a bound on the tokens its chat template adds.
MODEL_CONTEXT = 256
TEMPLATE_TOKENS = 64
# The server's --max-num-seqs (its default): n at most this.
MAX_NUM_SEQS = 16
# The server's --max-logprobs (its default): top_logprobs, logprobs and prompt_logprobs at most this.
MAX_LOGPROBS = 20


@schemathesis.hook
def map_body(ctx, body):
    """Names the served model in half the bodies, only where a string model is already there: a
    negative case that left the field out, or gave it the wrong type, stays invalid."""
    if (
        ctx.operation.path in MODEL_ROUTES
        and isinstance(body, dict)
        and isinstance(body.get("model"), str)
        and random.random() < 0.5
    ):
        body["model"] = SERVED_MODEL
    return body


@schemathesis.hook
def map_case(ctx, case):
    """Positive cases only (after filter_case): most drop the optional project header. A negative
    case keeps the header it may have broken."""
    meta = case.meta
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return case
    if case.operation.path == CHAT and case.headers and random.random() < 0.8:
        case.headers.pop("Compat-Project", None)
    return case


# The documented Compat-Project rule (src/protocol/openapi.ts): the generator has been seen to send
# values outside the published pattern as positive data.
_PART = r"(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\.\.[A-Za-z0-9._-]{1,62})"
_PROJECT = re.compile(rf"^{_PART}/{_PART}$")


def _whole(value) -> bool:
    """A JSON integer as the generator may send it (5 or 5.0)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()


def _token_ids(value):
    """Every number in a token-id field (a list, or a list of lists)."""
    if isinstance(value, list):
        for item in value:
            yield from _token_ids(item)
    elif _whole(value):
        yield int(value)


def _int_text(key: str) -> bool:
    try:
        int(key.strip())
        return True
    except ValueError:
        return False


def _utf8_bytes(value) -> int:
    """Bytes of every string in a value, keys too: no token of the model stands for less than one."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, list):
        return sum(_utf8_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_utf8_bytes(k) + _utf8_bytes(v) for k, v in value.items())
    return 0


def _may_overflow_context(body: dict, path: str) -> bool:
    """Whether the prompt and the completion might not fit the model's context (a documented
    limit the schema cannot count): every prompt byte taken as a token, ids as one each."""
    prompt = body.get("prompt")
    ids = len(list(_token_ids(prompt))) if isinstance(prompt, list) else 0
    tokens = ids + _utf8_bytes(prompt) + _utf8_bytes(body.get("messages")) + _utf8_bytes(body.get("tools"))
    asked = body.get("max_completion_tokens", body.get("max_tokens"))
    if not _whole(asked):
        asked = COMPLETIONS_DEFAULT_MAX_TOKENS if path == COMPLETIONS else 1
    truncate = body.get("truncate_prompt_tokens")
    if _whole(truncate) and truncate >= 0 and truncate + asked > MODEL_CONTEXT:
        return True
    return tokens + TEMPLATE_TOKENS + asked > MODEL_CONTEXT


def _json_text(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


# Schema keywords the server's structured outputs refuse with a 400 (src/core/structured/
# schema-support.ts, REFUSED_SCHEMA_KEYWORDS, passed by schemathesis.sh): a forced tool whose
# parameters use one is refused by a documented rule.
REFUSED_SCHEMA_KEYWORDS = set(json.loads(os.environ["ORTSERVE_REFUSED_SCHEMA_KEYWORDS"]))


def _uses_refused_keyword(schema) -> bool:
    """Whether a refused keyword appears anywhere in a JSON Schema (property names count too: a
    case skipped for that is only one positive case fewer)."""
    if isinstance(schema, dict):
        return any(k in REFUSED_SCHEMA_KEYWORDS or _uses_refused_keyword(v) for k, v in schema.items())
    if isinstance(schema, list):
        return any(_uses_refused_keyword(v) for v in schema)
    return False


def _parameters_not_object(tool) -> bool:
    function = tool.get("function") if isinstance(tool, dict) else None
    parameters = function.get("parameters") if isinstance(function, dict) else None
    return parameters is not None and (not isinstance(parameters, dict) or parameters.get("type") != "object")


def _breaks_messages_rules(body, path: str) -> bool:
    """The Messages routes' rules: tool_choice "tool" names one of tools; a tool_choice other
    than none needs a served model with a tool parser (the synthetic model has none); thinking
    enabled needs one with a reasoning parser (it has none), and its budget_tokens below max_tokens;
    output_config.effort a template that reads an effort (its template does not), and its format no
    tool_choice forcing a tool;
    a message's prompt and max_tokens inside the model's context."""
    output_config = body.get("output_config")
    if isinstance(output_config, dict) and output_config.get("effort") is not None and body.get("model") == SERVED_MODEL:
        return True
    forced = body.get("tool_choice")
    if (
        isinstance(output_config, dict)
        and output_config.get("format") is not None
        and isinstance(forced, dict)
        and forced.get("type") in ("any", "tool")
    ):
        return True
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        if body.get("model") == SERVED_MODEL:
            return True
        budget, most = thinking.get("budget_tokens"), body.get("max_tokens")
        if _whole(budget) and _whole(most) and budget >= most:
            return True
    if path == MESSAGES:
        asked = body.get("max_tokens") if _whole(body.get("max_tokens")) else 1
        prompt = _utf8_bytes(body.get("messages")) + _utf8_bytes(body.get("system")) + _utf8_bytes(body.get("tools"))
        if prompt + TEMPLATE_TOKENS + asked > MODEL_CONTEXT:
            return True
    choice = body.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind in ("any", "tool") and any(
        isinstance(t, dict) and _uses_refused_keyword(t.get("input_schema")) for t in body.get("tools") or []
    ):
        return True
    if kind == "tool":
        names = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        if choice.get("name") not in names:
            return True
    tools = body.get("tools") or []
    return body.get("model") == SERVED_MODEL and (kind not in (None, "none") or (kind is None and len(tools) > 0))


def _breaks_responses_rules(body) -> bool:
    """The Responses route's rules: previous_response_id names a stored response (none exists for
    generated ids); input items other than reasoning ones; reasoning.effort only where the model's template reads it (the synthetic one's
    does not); top_logprobs above 0 only with the logprobs include, which takes tool_choice none; a tool_choice other than none needs tools, a named one one of them, and with the
    served model (no tool parser) only none; stream_options only with stream; the prompt and
    max_output_tokens inside the model's context."""
    if body.get("previous_response_id") is not None:
        return True
    items = body.get("input")
    if isinstance(items, list) and all(isinstance(i, dict) and i.get("type") == "reasoning" for i in items):
        return True
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort") is not None:
        return True
    if body.get("stream_options") is not None and body.get("stream") is not True:
        return True
    choice = body.get("tool_choice")
    tools = body.get("tools") or []
    logprobs = "message.output_text.logprobs" in (body.get("include") or [])
    if _whole(body.get("top_logprobs")) and body["top_logprobs"] > 0 and not logprobs:
        return True
    if logprobs and (choice not in (None, "none") or (choice is None and tools)):
        return True
    if choice not in (None, "none") and not tools:
        return True
    if isinstance(choice, dict):
        names = [t.get("name") for t in tools if isinstance(t, dict)]
        if choice.get("name") not in names:
            return True
    if body.get("model") == SERVED_MODEL and tools and choice != "none":
        return True
    asked = body.get("max_output_tokens") if _whole(body.get("max_output_tokens")) else 1
    prompt = _utf8_bytes(body.get("input")) + _utf8_bytes(body.get("instructions")) + _utf8_bytes(tools)
    return prompt + TEMPLATE_TOKENS + asked > MODEL_CONTEXT


def _breaks_documented_rules(case) -> bool:
    """Rules across fields, which JSON Schema cannot state and the field descriptions do:
    min_tokens <= max_tokens; best_of = n; n and logprobs counts within the server's maxima; one
    constraint (structured_outputs or a JSON response_format), its json and structural_tag texts
    valid JSON, its grammar valid EBNF; thinking_token_budget only on a reasoning model (the served
    one is none); chat_template only where the operator trusts request templates (not here);
    and what depends on the served model: prompt and completion inside its context, token ids
    inside its vocabulary, priority only where it
    schedules by priority; repetition_detection's sizes and count; a tool_choice
    other than none only with tools, a forced one only with object parameters; stream_options and
    a non-zero prompt_logprobs only as stream allows. And header values outside their published
    pattern."""
    project = (case.headers or {}).get("Compat-Project")
    if project is not None and not _PROJECT.match(project):
        return True
    body = case.body if isinstance(case.body, dict) else {}
    # The server renders no template sent in a request unless its operator allows it.
    if body.get("chat_template") is not None:
        return True
    if case.operation.path in (MESSAGES, COUNT_TOKENS):
        return _breaks_messages_rules(body, case.operation.path)
    if case.operation.path == RESPONSES:
        return _breaks_responses_rules(body)
    if case.operation.path == "/detokenize":
        return any(i < 0 or i >= MODEL_VOCAB for i in _token_ids(body.get("tokens")))
    low = body.get("min_tokens")
    high = body.get("max_completion_tokens", body.get("max_tokens"))
    if high is None and case.operation.path == COMPLETIONS:
        high = COMPLETIONS_DEFAULT_MAX_TOKENS
    if _whole(low) and _whole(high) and low > high:
        return True
    best_of = body.get("best_of")
    if best_of is not None and best_of != (body.get("n") or 1):
        return True
    detection = body.get("repetition_detection")
    if isinstance(detection, dict):
        longest = detection.get("max_pattern_size") or 0
        shortest = detection.get("min_pattern_size") or 0
        count = detection.get("min_count") or 0
        if _whole(longest) and _whole(shortest) and _whole(count):
            if shortest > longest or (longest > 0 and count < 2):
                return True
    for field in ("top_logprobs", "prompt_logprobs"):
        if _whole(body.get(field)) and body[field] > MAX_LOGPROBS:
            return True
    if _whole(body.get("logprobs")) and body["logprobs"] > MAX_LOGPROBS:
        return True
    format_type = (body.get("response_format") or {}).get("type") if isinstance(body.get("response_format"), dict) else None
    if body.get("structured_outputs") is not None and format_type in ("json_object", "json_schema"):
        return True
    if _may_overflow_context(body, case.operation.path):
        return True
    if _whole(body.get("n")) and body["n"] > MAX_NUM_SEQS:
        return True
    if body.get("priority") not in (None, 0):
        return True
    ids = list(_token_ids(body.get("prompt")))
    for field in ("allowed_token_ids", "stop_token_ids"):
        ids += list(_token_ids(body.get(field)))
    bias = body.get("logit_bias")
    if isinstance(bias, dict):
        ids += [int(k) for k in bias if _int_text(k)]
    if any(i < 0 or i >= MODEL_VOCAB for i in ids):
        return True
    so = body.get("structured_outputs")
    if isinstance(so, dict):
        for field in ("json", "structural_tag"):
            if isinstance(so.get(field), str) and not _json_text(so[field]):
                return True
        # A grammar must be valid EBNF, which the generator's random text almost never is.
        if so.get("grammar") is not None:
            return True
    if body.get("thinking_token_budget") is not None and body.get("model") == SERVED_MODEL:
        return True
    choice = body.get("tool_choice")
    if choice not in (None, "none") and not body.get("tools"):
        return True
    forced = choice == "required" or isinstance(choice, dict)
    if forced and any(_parameters_not_object(tool) for tool in body.get("tools") or []):
        return True
    if forced and any(
        isinstance(tool, dict)
        and isinstance(tool.get("function"), dict)
        and _uses_refused_keyword(tool["function"].get("parameters"))
        for tool in body.get("tools") or []
    ):
        return True
    streamed = body.get("stream") is True
    if body.get("stream_options") is not None and not streamed:
        return True
    return streamed and body.get("prompt_logprobs") not in (None, 0)


@schemathesis.hook
def filter_case(ctx, case):
    """Positive cases are what the document promises the server accepts: one that breaks a
    documented rule the schema cannot express is not one of them. Negative cases pass through."""
    meta = case.meta
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return True
    return not _breaks_documented_rules(case)
