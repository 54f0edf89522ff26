"""botocore's debug lines about an S3 request reach ``serve``'s log without the request's
credentials: the session token, the SigV4 ``Authorization`` value and its signature, the key id.

botocore prints a request's headers as a dict of bytes (``'X-Amz-Security-Token': b'...'``)
and the signature on a line of its own (``Signature:\\n...``). A fresh process configured as
``serve --http`` configures it, at ``debug``, with a real boto3 client asking a real loopback
HTTP server for an object's head.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")
pytest.importorskip("boto3", reason="the toolhost-core[s3] extra (boto3) is not installed")

from test_log_http_response_headers import logged_at_debug

KEY_ID, SECRET_KEY, SESSION_TOKEN = "ASIAQXAMPLEKEYID0001", "SECRETACCESSKEYxyz1", "SESSIONtok9"

#: boto3 asks a loopback server for an object's head.
REQUEST = f"""
import http.server, threading
import boto3
from botocore.config import Config

class Found(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", 0), Found)
threading.Thread(target=server.serve_forever, daemon=True).start()
client = boto3.session.Session(
    aws_access_key_id="{KEY_ID}", aws_secret_access_key="{SECRET_KEY}",
    aws_session_token="{SESSION_TOKEN}", region_name="us-east-1",
).client("s3", endpoint_url=f"http://127.0.0.1:{{server.server_address[1]}}",
         config=Config(retries={{"max_attempts": 1}}, s3={{"addressing_style": "path"}}))
client.head_object(Bucket="bkt", Key="k")
server.shutdown()
"""


def test_botocores_request_lines_carry_no_credential() -> None:
    # Regression: 'X-Amz-Security-Token': [redacted]'SESSIONtok9' and 'Authorization':
    # [redacted]'AWS4-HMAC-SHA256 Credential=..., Signature=<hex>' (the marker took the b).
    lines = logged_at_debug(REQUEST)
    said = "\n".join(line["event"] for line in lines)
    for secret in (KEY_ID, SECRET_KEY, SESSION_TOKEN):
        assert secret not in said
    assert not re.search(r"Signature(=|:\n)[0-9a-f]{16}", said)
    (sent,) = [line["event"] for line in lines if line["logger"] == "botocore.endpoint"
               and line["event"].startswith("Sending http request")]
    assert "'X-Amz-Security-Token': b'[redacted]'" in sent
    assert "'Authorization': b'AWS4-HMAC-SHA256 [redacted]'" in sent
    assert "Signature:\n[redacted]" in said
