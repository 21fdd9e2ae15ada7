"""An MCP server written with the official Python SDK's FastMCP, for the test that attaches it
to an agent from memgpt.toml. Usage: fastmcp_calc.py [stdio | http PORT]."""
import os
import sys

from mcp.server.fastmcp import FastMCP

server = FastMCP("calc")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


@server.tool()
def exit_once(marker: str) -> str:
    """Exit the server process without answering, unless the file `marker` exists (it is
    created first): a crash that happens once, for the tests of restarts."""
    if os.path.exists(marker):
        return "still running"
    with open(marker, "w") as f:
        f.write("exited once\n")
    os._exit(3)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.settings.host = "127.0.0.1"
        server.settings.port = int(sys.argv[2])
        server.run(transport="streamable-http")
    else:
        server.run(transport="stdio")
