"""A small MCP server on the legacy HTTP+SSE transport (protocol 2024-11-05), for the tests of
synthgate's SSE client transport (tests/api/mcp_sse.rs).

Usage: sse_server.py PORT   (0 picks a free port)

The first stdout line is the SSE URL, e.g. `http://127.0.0.1:41234/sse`, printed once the socket
is listening. We bind the socket ourselves and hand it to uvicorn, because `MCPServer.run()`
cannot report the port it bound; binding here also means there is no pick-then-bind race.

When the environment variable SSE_SERVER_TOKEN is set, every request must carry
`Authorization: Bearer <token>`; others get 401.
"""

import base64
import os
import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import Image, MCPServer

# A 1x1 transparent PNG.
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

mcp = MCPServer("synthgate-sse-test")


@mcp.tool()
def echo(text: str) -> str:
    """Returns its argument."""
    return text


@mcp.tool()
def add(a: float, b: float) -> float:
    """Adds two numbers."""
    return a + b


@mcp.tool()
def image() -> Image:
    """Returns a 1x1 PNG."""
    return Image(data=PNG_1X1, format="png")


@mcp.tool()
def boom() -> str:
    """Always fails; the SDK turns the exception into a result with isError set."""
    raise RuntimeError("boom")


@mcp.tool()
async def sleep(seconds: float) -> str:
    """Sleeps, so a test can have a call in flight when it kills the server. Says so on
    stdout first, for the test to wait on instead of guessing when the call arrived."""
    print("sleeping", flush=True)
    await anyio.sleep(seconds)
    return "slept"


@mcp.tool()
def whoami() -> int:
    """Returns the server's process id, so a test can tell two servers apart."""
    return os.getpid()


def require_bearer(app, token: str):
    """Wraps an ASGI app so that HTTP requests without `Authorization: Bearer <token>` get 401."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


async def main(port: int) -> None:
    host = "127.0.0.1"
    app = mcp.sse_app(host=host)
    token = os.environ.get("SSE_SERVER_TOKEN")
    if token:
        app = require_bearer(app, token)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    # Listening already: a client may connect as soon as it reads this line.
    print(f"http://{host}:{sock.getsockname()[1]}/sse", flush=True)

    config = uvicorn.Config(app, log_level="warning")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 0)
