"""The server's web page: open ``http://host:port/`` on a phone or another computer, press
Record, and see live text (the microphone over our WebSocket protocol, an AudioWorklet sending
16 kHz PCM); drop a file to transcribe it through the OpenAI-compatible endpoint. Plain static
files in ``web_page/``, shipped in the package; no build step. The page holds no data, so it
needs no key; what it calls does (the page asks for the key and sends it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parent / "web_page"
TYPES = {"app.js": "text/javascript", "capture.js": "text/javascript", "style.css": "text/css"}


async def index(request: Any) -> Any:
    from starlette.responses import FileResponse

    return FileResponse(PAGE / "index.html", media_type="text/html",
                        headers={"Cache-Control": "no-cache"})


async def asset(request: Any) -> Any:
    from starlette.responses import FileResponse, PlainTextResponse

    name = request.path_params["name"]
    if name not in TYPES:  # only the page's own files, never a path the client makes up
        return PlainTextResponse("not found\n", status_code=404)
    return FileResponse(PAGE / name, media_type=TYPES[name],
                        headers={"Cache-Control": "no-cache"})


def routes() -> list[Any]:
    from starlette.routing import Route

    return [Route("/", index), Route("/web/{name}", asset)]
