"""The memory service over HTTP: the Starlette app (app), reading requests (requests), the
envelopes and error responses (responses), the access log (access), the OpenAPI document
(openapi) and `pymem serve` on uvicorn (run). Needs the `server` extra.
"""
