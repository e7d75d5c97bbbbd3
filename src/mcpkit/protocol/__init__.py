"""The MCP protocol core: messages, JSON-RPC codec, errors, versions and rules.

Invariant: nothing in this package performs IO or imports an IO library. It takes bytes
and Python values in and gives bytes, values or exceptions out; transports and sessions
own sockets, tasks and timeouts.
"""
