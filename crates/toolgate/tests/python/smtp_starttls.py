"""An SMTP server on loopback for the `message` email tests (aiosmtpd, from the peers' venv).

Usage: smtp_starttls.py CERT KEY USER PASSWORD
STARTTLS is required before MAIL and AUTH (the certificate is the test's self-signed one);
AUTH PLAIN/LOGIN must match USER and PASSWORD. Prints `PORT <n>` once listening, then one JSON
line per accepted message: {"mail_from", "rcpt_tos", "data", "tls", "auth"}.
"""

import json
import socket
import ssl
import sys

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult


def main() -> None:
    cert, key, user, password = sys.argv[1:5]
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            print(
                json.dumps(
                    {
                        "mail_from": envelope.mail_from,
                        "rcpt_tos": envelope.rcpt_tos,
                        "data": envelope.content.decode("utf-8", "replace"),
                        "tls": session.ssl is not None,
                        "auth": session.authenticated,
                    }
                ),
                flush=True,
            )
            return "250 OK"

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = auth_data.login.decode() == user and auth_data.password.decode() == password
        return AuthResult(success=ok)

    # aiosmtpd's controller connects to its own port to check it is up, so it needs a real
    # port number: take a free one from the kernel.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(
        Handler(),
        hostname="127.0.0.1",
        port=port,
        tls_context=context,
        require_starttls=True,
        authenticator=authenticator,
        auth_required=True,
        auth_require_tls=True,
        server_hostname="localhost",
    )
    controller.start()
    print(f"PORT {port}", flush=True)
    # Until the test closes our stdin (or kills us).
    try:
        sys.stdin.read()
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
