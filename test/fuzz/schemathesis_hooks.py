"""Schemathesis hooks that steer generated chat requests past the first checks, so fuzzing
reaches body validation and the engine: most requests drop the optional project header (its
format is checked before the body), and half name the served model."""
import random

import schemathesis

SERVED_MODEL = "tiny"
CHAT = "/v1/chat/completions"


@schemathesis.hook
def map_headers(ctx, headers):
    if ctx.operation.path == CHAT and headers and random.random() < 0.8:
        headers.pop("Compat-Project", None)
    return headers


@schemathesis.hook
def map_body(ctx, body):
    if ctx.operation.path == CHAT and isinstance(body, dict) and random.random() < 0.5:
        body["model"] = SERVED_MODEL
    return body
