"""The gateway's JSON responses, rendered by `envscaler.common.jsoncodec` (orjson) instead of the standard
library: the same compact UTF-8 JSON as Starlette's ``JSONResponse``, in a fraction of the time
(a tool call's answer is rendered on every call)."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from envscaler.common import jsoncodec


class FastJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return jsoncodec.dump_bytes(content)
