#!/usr/bin/env python3
"""Tiny echo service and proxyless xDS gRPC client for tests/it/e2e/grpc_proxyless.rs.

No protoc is needed: the method is a generic unary handler with identity (bytes)
serialization.

  echo.py server PORT [PREFIX] [--bind ADDRESS]
      Serves `/echo.Echo/Say` on ADDRESS:PORT (ADDRESS defaults to 127.0.0.1;
      0.0.0.0 in a mesh pod), answering PREFIX + request bytes (PREFIX
      defaults to "echo:"), after N seconds for a request `sleep:N`. Prints
      "listening PORT" once ready. With `--service NAME` it also serves NAME's
      methods `Echo` and `EchoTwo` (the Gateway API conformance suite's GrpcEcho),
      answering PREFIX, the method and the request's metadata (`k=v;...`).

  echo.py client TARGET [MESSAGE] [--deadline SECONDS] [--header K=V ...] [--authority A]
      Reads GRPC_XDS_BOOTSTRAP (done by grpc itself for xds:/// targets),
      calls `/echo.Echo/Say` on TARGET (e.g. xds:///echo.a.svc.cluster.local:7070)
      with MESSAGE (default "hello"), retrying on UNAVAILABLE and
      DEADLINE_EXCEEDED until the overall deadline (default 20 s). Prints
      "reply: <reply>" and exits 0, or prints the last error and exits 1.
      --authority sets the calls' :authority (a sidecar routes by it).
      --method /SERVICE/METHOD calls that method instead; --once makes one call
      and prints its status code on failure (`code: UNIMPLEMENTED`); --repeat N
      then makes N more calls on the same channel, printing each reply.
"""

import sys
import time
from concurrent import futures

import grpc

METHOD = "/echo.Echo/Say"


def serve(port, prefix, address, service=None):
    prefix_bytes = prefix.encode()

    def echo_of(method):
        def handle(request, context):
            meta = ";".join("%s=%s" % (k, v) for k, v in context.invocation_metadata())
            return prefix_bytes + ("%s|%s|" % (method, meta)).encode() + request

        return grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=None, response_serializer=None
        )

    def say(request, context):
        # `sleep:SECONDS` answers after that long (a slow upstream).
        if request.startswith(b"sleep:"):
            time.sleep(float(request[len(b"sleep:"):].decode()))
        return prefix_bytes + request

    handler = grpc.method_handlers_generic_handler(
        "echo.Echo",
        {
            "Say": grpc.unary_unary_rpc_method_handler(
                say, request_deserializer=None, response_serializer=None
            )
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    if service:
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    service, {"Echo": echo_of("Echo"), "EchoTwo": echo_of("EchoTwo")}
                ),
            )
        )
    bound = server.add_insecure_port("%s:%d" % (address, port))
    if bound != port:
        print("could not bind %s:%d (got %d)" % (address, port, bound), flush=True)
        sys.exit(2)
    server.start()
    print("listening %d" % port, flush=True)
    server.wait_for_termination()


def client(target, message, deadline_s, headers, authority=None, method=METHOD, once=False, repeat=0):
    import os

    print("GRPC_XDS_BOOTSTRAP=%s" % os.environ.get("GRPC_XDS_BOOTSTRAP"), flush=True)
    deadline = time.monotonic() + deadline_s
    options = [("grpc.default_authority", authority)] if authority else None
    channel = grpc.insecure_channel(target, options=options)
    say = channel.unary_unary(
        method, request_serializer=None, response_deserializer=None
    )
    last = None
    attempt = 0
    repeats = 0
    while True:
        attempt += 1
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            reply = say(
                message.encode(),
                timeout=min(5.0, remaining),
                metadata=headers or None,
                wait_for_ready=False,
            )
            print("reply: %s" % reply.decode(errors="replace"), flush=True)
            for _ in range(repeat):
                more = say(message.encode(), timeout=5.0, metadata=headers or None)
                print("reply: %s" % more.decode(errors="replace"), flush=True)
            channel.close()
            sys.exit(0)
        except grpc.RpcError as e:
            if once:
                print("code: %s" % e.code().name, flush=True)
                channel.close()
                sys.exit(1)
            err = "%s: %s" % (e.code(), e.details())
            if err == last:
                repeats += 1
            else:
                if repeats:
                    print("  (same error %d more times)" % repeats, flush=True)
                repeats = 0
                print("attempt %d failed: %s" % (attempt, err), flush=True)
            last = err
            if e.code() not in (
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.DEADLINE_EXCEEDED,
            ):
                break
            time.sleep(0.2)
    if repeats:
        print("  (same error %d more times)" % repeats, flush=True)
    print("FAILED after %d attempts: %s" % (attempt, last), flush=True)
    channel.close()
    sys.exit(1)


def main(argv):
    if len(argv) >= 2 and argv[1] == "server":
        port = int(argv[2])
        rest = argv[3:]
        address = "127.0.0.1"
        if "--bind" in rest:
            i = rest.index("--bind")
            address = rest[i + 1]
            del rest[i : i + 2]
        service = None
        if "--service" in rest:
            i = rest.index("--service")
            service = rest[i + 1]
            del rest[i : i + 2]
        prefix = rest[0] if rest else "echo:"
        serve(port, prefix, address, service)
    elif len(argv) >= 2 and argv[1] == "client":
        target = argv[2]
        rest = argv[3:]
        message = "hello"
        deadline_s = 20.0
        headers = []
        authority = None
        method = METHOD
        once = False
        repeat = 0
        i = 0
        positional = []
        while i < len(rest):
            if rest[i] == "--deadline":
                deadline_s = float(rest[i + 1])
                i += 2
            elif rest[i] == "--authority":
                authority = rest[i + 1]
                i += 2
            elif rest[i] == "--method":
                method = rest[i + 1]
                i += 2
            elif rest[i] == "--once":
                once = True
                i += 1
            elif rest[i] == "--repeat":
                repeat = int(rest[i + 1])
                i += 2
            elif rest[i] == "--header":
                k, _, v = rest[i + 1].partition("=")
                headers.append((k.lower(), v))
                i += 2
            else:
                positional.append(rest[i])
                i += 1
        if positional:
            message = positional[0]
        client(target, message, deadline_s, headers, authority, method, once, repeat)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
